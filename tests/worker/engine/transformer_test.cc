#include "worker/engine/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

using testing::MakeTinyModel;
using testing::NaiveForward;
using testing::TinyModelOptions;

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

Transformer MakeTransformer(const Model& m, int threads = 1) {
  auto t = Transformer::Create(m, {.num_threads = threads});
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

void ExpectMatchesNaive(const TinyModelOptions& o, int n) {
  const Model m = MakeTinyModel(o);
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(n, o.vocab);
  KvCache cache(m.config, n);
  auto out = t.Forward({.tokens = tokens, .logits = LogitRows::kAll}, cache);
  ASSERT_TRUE(out.ok()) << out.status();
  const auto ref = NaiveForward(m, tokens);
  double max_err = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < o.vocab; ++j)
      max_err = std::max(max_err, std::abs(out->logits.data()[i * o.vocab + j] - ref[i][j]));
  EXPECT_LT(max_err, 2e-4) << "max abs logit error vs the naive reference";
}

TEST(TransformerTest, MatchesNaiveReferenceWithGqaInterleavedRope) {
  ExpectMatchesNaive({}, 40);
}

TEST(TransformerTest, MatchesNaiveReferenceWithHalfSplitRopeAndQkvBias) {
  ExpectMatchesNaive({.qkv_bias = true, .tied = false, .rope_style = RopeStyle::kHalfSplit}, 40);
}

TEST(TransformerTest, MatchesNaiveReferenceWithoutGqaAcrossQueryBlocks) {
  // 300 tokens spans several attention query blocks, so the causal prefix logic is exercised.
  ExpectMatchesNaive({.n_layers = 2, .n_heads = 2, .n_kv_heads = 2}, 300);
}

TEST(TransformerTest, IncrementalDecodeEqualsPrefill) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(24, m.config.vocab_size);
  KvCache full(m.config, 24);
  auto all = t.Forward({.tokens = tokens, .logits = LogitRows::kAll}, full);
  ASSERT_TRUE(all.ok());

  KvCache inc(m.config, 24);
  auto first = t.Forward({.tokens = std::span(tokens).first(16), .logits = LogitRows::kNone}, inc);
  ASSERT_TRUE(first.ok());
  for (int i = 16; i < 24; ++i) {
    auto step = t.Forward({.tokens = std::span(tokens).subspan(i, 1)}, inc);
    ASSERT_TRUE(step.ok()) << step.status();
    for (int j = 0; j < m.config.vocab_size; ++j) {
      EXPECT_NEAR(step->logits.data()[j], all->logits.data()[i * m.config.vocab_size + j], 1e-4)
          << "position " << i << " token " << j;
    }
  }
  EXPECT_EQ(inc.length(0), 24);
}

TEST(TransformerTest, ResumingAtALayerFromRecordedInputsReproducesLogits) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const int n = 20;
  const auto tokens = Tokens(n, m.config.vocab_size);
  std::vector<int32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  KvCache cache(m.config, n);
  auto full = t.Forward({.tokens = tokens, .logits = LogitRows::kAll, .record_rows = rows}, cache);
  ASSERT_TRUE(full.ok());
  for (int l = 0; l < m.config.n_layers; ++l) {
    ASSERT_EQ(full->layer_inputs[l].dim(0), n);
    KvCache fresh(m.config, n);
    auto resumed = t.Forward(
        {.start_layer = l, .layer_input = &full->layer_inputs[l], .logits = LogitRows::kAll},
        fresh);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(0, std::memcmp(resumed->logits.data(), full->logits.data(),
                             full->logits.numel() * sizeof(float)))
        << "resume at layer " << l;
    EXPECT_EQ(fresh.length(l), n);
    if (l > 0) {
      EXPECT_EQ(fresh.length(l - 1), 0) << "layers below start_layer are not touched";
    }
  }
}

TEST(TransformerTest, ResultsDoNotDependOnThreadCount) {
  const Model m = MakeTinyModel({.n_heads = 4, .n_kv_heads = 1});
  const auto tokens = Tokens(200, m.config.vocab_size);
  std::vector<float> logits[2];
  for (int threads : {1, 2}) {
    const Transformer t = MakeTransformer(m, threads);
    KvCache cache(m.config, 200);
    auto out = t.Forward({.tokens = tokens, .logits = LogitRows::kAll}, cache);
    ASSERT_TRUE(out.ok());
    logits[threads - 1].assign(out->logits.span().begin(), out->logits.span().end());
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(TransformerTest, FirstLogitRowReturnsTheTailOfAllLogits) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  const auto tokens = Tokens(12, m.config.vocab_size);
  KvCache a(m.config, 12), b(m.config, 12);
  auto all = t.Forward({.tokens = tokens, .logits = LogitRows::kAll}, a);
  auto tail = t.Forward({.tokens = tokens, .logits = LogitRows::kAll, .first_logit_row = 5}, b);
  ASSERT_TRUE(all.ok() && tail.ok());
  ASSERT_EQ(tail->logits.dim(0), 7);
  const int v = m.config.vocab_size;
  // Equal up to GEMM rounding: BLAS may order a row's sums differently for another row count.
  for (int i = 0; i < 7 * v; ++i) {
    EXPECT_NEAR(tail->logits.data()[i], all->logits.data()[5 * v + i], 1e-5) << i;
  }
}

TEST(TransformerTest, RejectsTokenOutsideVocabulary) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  KvCache cache(m.config, 4);
  const std::vector<int32_t> tokens = {1, m.config.vocab_size};
  auto out = t.Forward({.tokens = tokens}, cache);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("index 1"), std::string::npos) << out.status();
}

TEST(TransformerTest, FullCacheIsResourceExhausted) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  KvCache cache(m.config, 4);
  const auto tokens = Tokens(5, m.config.vocab_size);
  EXPECT_EQ(t.Forward({.tokens = tokens}, cache).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TransformerTest, ResumeWithoutLayerInputIsInvalid) {
  const Model m = MakeTinyModel();
  const Transformer t = MakeTransformer(m);
  KvCache cache(m.config, 4);
  const auto tokens = Tokens(2, m.config.vocab_size);
  EXPECT_EQ(t.Forward({.tokens = tokens, .start_layer = 1}, cache).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
