#include "worker/compress/prefill_observer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/ops/attention.h"
#include "tests/worker/compress/naive_attention.h"
#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

using worker::testing::MakeTinyModel;

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

Transformer MakeTransformer(const worker::Model& m, int threads = 1) {
  auto t = Transformer::Create(m, {.num_threads = threads});
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

bool SameLayer(const KvCache& a, const KvCache& b, int layer) {
  if (a.length(layer) != b.length(layer)) return false;
  for (int h = 0; h < a.n_kv_heads(); ++h) {
    for (int i = 0; i < a.length(layer); ++i) {
      const auto ka = a.Key(layer, h, i), kb = b.Key(layer, h, i);
      const auto va = a.Value(layer, h, i), vb = b.Value(layer, h, i);
      if (std::memcmp(ka.data(), kb.data(), ka.size_bytes()) != 0 ||
          std::memcmp(va.data(), vb.data(), va.size_bytes()) != 0 ||
          a.Position(layer, h, i) != b.Position(layer, h, i)) {
        return false;
      }
    }
  }
  return true;
}

TEST(PrefillObserverTest, CacheAndLastLogitsAreBitIdenticalToForward) {
  for (int threads : {1, 2}) {
    const worker::Model m = MakeTinyModel({.n_layers = 3, .n_heads = 4, .n_kv_heads = 2});
    const Transformer t = MakeTransformer(m, threads);
    const auto tokens = Tokens(150, m.config.vocab_size);  // > one 128-query attention block
    KvCache forward_cache(m.config, 150), observed_cache(m.config, 150);
    auto forward = t.Forward({.tokens = tokens}, forward_cache);
    ASSERT_TRUE(forward.ok());
    auto observed = PrefillObserved(t, tokens, {.window = 16, .accumulated = true}, observed_cache);
    ASSERT_TRUE(observed.ok()) << observed.status();
    ASSERT_EQ(observed->logits.shape(), forward->logits.shape());
    EXPECT_EQ(0, std::memcmp(observed->logits.data(), forward->logits.data(),
                             forward->logits.numel() * sizeof(float)))
        << "threads " << threads;
    for (int l = 0; l < m.config.n_layers; ++l) {
      EXPECT_TRUE(SameLayer(forward_cache, observed_cache, l)) << "layer " << l;
    }
  }
}

// Runs the layers with a hook that does what Forward does and keeps each layer's queries, so the
// statistics can be recomputed naively from the very same q and k.
std::vector<std::vector<float>> CaptureQueries(const Transformer& t,
                                               std::span<const int32_t> tokens,
                                               KvCache& cache) {
  const ModelConfig& c = t.config();
  std::vector<std::vector<float>> queries(c.n_layers);
  auto attend = [&](int layer, const kernels::TensorView& q3, kernels::Tensor& k,
                    kernels::Tensor& v, std::span<const int32_t> pos,
                    const kernels::TensorView& out) -> Status {
    RETURN_IF_ERROR(cache.Append(layer, k.span(), v.span(), pos));
    queries[layer].assign(q3.data, q3.data + q3.numel());
    return kernels::CausalAttention(t.op_context(), q3, pos, cache.View(layer),
                                    1.0f / std::sqrt(static_cast<float>(c.head_dim)), out);
  };
  auto x = t.Embed(tokens);
  EXPECT_TRUE(x.ok());
  std::vector<int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  EXPECT_TRUE(t.RunLayers(*x, {.positions = positions}, attend).ok());
  return queries;
}

TEST(PrefillObserverTest, StatisticsEqualNaiveAttentionOfEveryLayer) {
  const worker::Model m = MakeTinyModel({.n_layers = 3, .n_heads = 4, .n_kv_heads = 2});
  const Transformer t = MakeTransformer(m);
  const int n = 40, w = 8, heads = m.config.n_heads;
  const auto tokens = Tokens(n, m.config.vocab_size, 9);
  KvCache cache(m.config, n), reference(m.config, n);
  auto observed = PrefillObserved(t, tokens, {.window = w, .accumulated = true}, cache);
  ASSERT_TRUE(observed.ok()) << observed.status();
  const auto queries = CaptureQueries(t, tokens, reference);

  for (int l = 0; l < m.config.n_layers; ++l) {
    const LayerStats& s = observed->layers[l];
    ASSERT_EQ(s.length, n);
    ASSERT_EQ(s.window, w);
    const auto attn = testing::NaiveAttention(queries[l], n, 0, heads, reference, l);
    double entropy = 0;
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < n; ++j) {
        double sum = 0, sumsq = 0;
        for (int i = n - w; i < n; ++i) {
          sum += attn[h][i][j];
          sumsq += attn[h][i][j] * attn[h][i][j];
          if (j < n - w) entropy -= attn[h][i][j] * std::log(attn[h][i][j] + 1e-10);
        }
        EXPECT_NEAR(s.window_sum[h * n + j], sum, 1e-12) << "layer " << l;
        EXPECT_NEAR(s.window_sumsq[h * n + j], sumsq, 1e-12) << "layer " << l;
      }
    }
    EXPECT_NEAR(s.window_entropy, entropy, 1e-9) << "layer " << l;
    for (int kvh = 0; kvh < m.config.n_kv_heads; ++kvh) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int h = 2 * kvh; h < 2 * kvh + 2; ++h)
          for (int i = 0; i < n; ++i) acc += attn[h][i][j];
        EXPECT_NEAR(s.accumulated[kvh * n + j], acc, 1e-10) << "layer " << l;
      }
    }
  }
}

TEST(PrefillObserverTest, SkipsStatisticsThatWereNotAskedFor) {
  const worker::Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(20, m.config.vocab_size);
  KvCache cache(m.config, 20);
  auto observed = PrefillObserved(t, tokens, {.window = 4}, cache);
  ASSERT_TRUE(observed.ok());
  EXPECT_TRUE(observed->layers[0].has_window());
  EXPECT_FALSE(observed->layers[0].has_accumulated());
  KvCache bare_cache(m.config, 20);
  observed = PrefillObserved(t, tokens, {.window_stats = false}, bare_cache);
  ASSERT_TRUE(observed.ok());
  EXPECT_FALSE(observed->layers[1].has_window());
  EXPECT_EQ(observed->layers[1].length, 20);
  EXPECT_EQ(observed->layers[1].n_kv_heads, m.config.n_kv_heads);
}

TEST(PrefillObserverTest, WindowLongerThanThePromptCoversThePrompt) {
  const worker::Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(10, m.config.vocab_size);
  KvCache cache(m.config, 10);
  auto observed = PrefillObserved(t, tokens, {.window = 32}, cache);
  ASSERT_TRUE(observed.ok());
  EXPECT_EQ(observed->layers[0].window, 10);
  EXPECT_EQ(observed->layers[0].prefix_end(), 0);
  EXPECT_EQ(observed->layers[0].window_entropy, 0.0);
}

TEST(PrefillObserverTest, RejectsANonEmptyOrSmallCacheAndBadInput) {
  const worker::Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(12, m.config.vocab_size);
  KvCache small(m.config, 11);
  EXPECT_EQ(PrefillObserved(t, tokens, {}, small).status().code(),
            absl::StatusCode::kResourceExhausted);
  KvCache used(m.config, 30);
  ASSERT_TRUE(PrefillObserved(t, tokens, {}, used).ok());
  EXPECT_EQ(PrefillObserved(t, tokens, {}, used).status().code(),
            absl::StatusCode::kFailedPrecondition);
  KvCache fresh(m.config, 30);
  EXPECT_EQ(PrefillObserved(t, {}, {}, fresh).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrefillObserved(t, tokens, {.window = 0}, fresh).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> bad{1, 2, m.config.vocab_size};
  EXPECT_EQ(PrefillObserved(t, bad, {}, fresh).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
