#include "eval/compress/method.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::eval {
namespace {

using worker::testing::MakeTinyModel;

constexpr int kPrompt = 64;
constexpr int kDecode = 5;

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

// A tiny model (4 layers, GQA 4:2), a prompt and the continuation to decode after it.
class MethodTest : public ::testing::Test {
 protected:
  MethodTest()
      : model_(MakeTinyModel({.n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .seed = 21})),
        transformer_(std::move(worker::Transformer::Create(model_, {}).value())),
        tokens_(Tokens(kPrompt + kDecode, model_.config.vocab_size)) {
    options_.window = 8;
  }

  std::span<const int32_t> prompt() const { return std::span(tokens_).first(kPrompt); }
  std::span<const int32_t> continuation() const { return std::span(tokens_).subspan(kPrompt); }

  // Prefill, plan, compress; returns the report and leaves the compressed cache in `cache`.
  StatusOr<CompressReport> Run(std::string_view name, int average, worker::KvCache& cache,
                               std::span<const int> map = {}) {
    ASSIGN_OR_RETURN(const Method method, ParseMethod(name));
    ASSIGN_OR_RETURN(
        ObservedPrefill p,
        PrefillObserved(transformer_, prompt(), ObserverOptionsFor(method, options_), cache));
    ASSIGN_OR_RETURN(const std::vector<int> budgets,
                     PlanBudgets(method, average, p.layers, options_, map));
    last_budgets_ = budgets;
    return CompressCache(method, budgets, p.layers, options_, cache);
  }

  // Teacher-forced decode of the continuation at the true positions kPrompt, kPrompt + 1, ...
  StatusOr<kernels::Tensor> Decode(worker::KvCache& cache) {
    std::vector<int32_t> positions(kDecode);
    std::iota(positions.begin(), positions.end(), kPrompt);
    ASSIGN_OR_RETURN(
        worker::ForwardResult r,
        transformer_.Forward(
            {.tokens = continuation(), .positions = positions, .logits = worker::LogitRows::kAll},
            cache));
    return std::move(r.logits);
  }

  worker::Model model_;
  worker::Transformer transformer_;
  std::vector<int32_t> tokens_;
  CompressOptions options_;
  std::vector<int> last_budgets_;
};

const std::vector<int> kRippleMap{40, 32, 24, 32};  // 128 = 4 layers * 32

TEST_F(MethodTest, ParsesShorthandsAndAllocationSelectionPairs) {
  struct Case {
    const char* name;
    AllocationKind allocation;
    SelectionKind selection;
  };
  for (const Case& c : {Case{"full", AllocationKind::kFull, SelectionKind::kFull},
                        Case{"streaming", AllocationKind::kUniform, SelectionKind::kStreaming},
                        Case{"h2o", AllocationKind::kUniform, SelectionKind::kH2o},
                        Case{"cake", AllocationKind::kCake, SelectionKind::kCake},
                        Case{"ripple+snapkv", AllocationKind::kMap, SelectionKind::kSnapKv},
                        Case{"pyramid+snapkv", AllocationKind::kPyramid, SelectionKind::kSnapKv},
                        Case{"uniform+snapkv", AllocationKind::kUniform, SelectionKind::kSnapKv},
                        Case{"uniform+h2o", AllocationKind::kUniform, SelectionKind::kH2o},
                        Case{"map+streaming", AllocationKind::kMap, SelectionKind::kStreaming},
                        Case{"cake+snapkv", AllocationKind::kCake, SelectionKind::kSnapKv},
                        Case{"resp+h2o", AllocationKind::kMap, SelectionKind::kH2o}}) {
    auto m = ParseMethod(c.name);
    ASSERT_TRUE(m.ok()) << c.name;
    EXPECT_EQ(m->name, c.name);
    EXPECT_EQ(m->allocation, c.allocation) << c.name;
    EXPECT_EQ(m->selection, c.selection) << c.name;
  }
  const auto known = KnownMethods();
  EXPECT_THAT(known, ::testing::Contains("ripple+snapkv"));
  EXPECT_THAT(known, ::testing::Contains("resp+snapkv"));
  // Only resp+S maps come from a response profile.
  EXPECT_TRUE(ParseMethod("resp+snapkv")->from_response_profile());
  EXPECT_FALSE(ParseMethod("ripple+snapkv")->from_response_profile());
  EXPECT_FALSE(ParseMethod("map+h2o")->from_response_profile());
  for (const std::string& name : known) EXPECT_TRUE(ParseMethod(name).ok()) << name;
}

TEST_F(MethodTest, UnknownMethodIsInvalidArgumentListingTheKnownOnes) {
  for (const char* bad : {"snap", "ripple+", "+snapkv", "uniform+full", "Ripple+snapkv", ""}) {
    auto m = ParseMethod(bad);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(m.status().message()),
                ::testing::AllOf(::testing::HasSubstr("ripple+snapkv"),
                                 ::testing::HasSubstr("streaming"), ::testing::HasSubstr("cake")));
  }
}

TEST_F(MethodTest, ObserverRecordsOnlyWhatTheMethodNeeds) {
  auto h2o = ObserverOptionsFor(*ParseMethod("h2o"), options_);
  EXPECT_TRUE(h2o.accumulated);
  EXPECT_FALSE(h2o.window_stats);
  auto cake_streaming = ObserverOptionsFor(*ParseMethod("cake+streaming"), options_);
  EXPECT_TRUE(cake_streaming.window_stats);  // CAKE's allocation reads the window
  EXPECT_FALSE(cake_streaming.accumulated);
  EXPECT_EQ(ObserverOptionsFor(*ParseMethod("snapkv"), options_).window, 8);
}

TEST_F(MethodTest, KeptCountsEqualBudgetsAndTotalsAreEqualAcrossMethods) {
  const int average = 32;
  const int64_t expected_total = int64_t{4} * average;
  for (const char* name :
       {"ripple+snapkv", "pyramid+snapkv", "uniform+snapkv", "cake", "streaming", "h2o",
        "cake+snapkv", "pyramid+h2o", "map+streaming", "uniform+cake", "cake+h2o"}) {
    worker::KvCache cache(model_.config, kPrompt + kDecode);
    auto report = Run(name, average, cache, kRippleMap);
    ASSERT_TRUE(report.ok()) << name << ": " << report.status();
    EXPECT_EQ(report->kept, last_budgets_) << name;
    EXPECT_EQ(report->total, expected_total) << name;
    for (int l = 0; l < 4; ++l) {
      EXPECT_EQ(cache.length(l), last_budgets_[l]) << name << " layer " << l;
      // Entries stay in position order with their original positions.
      for (int h = 0; h < 2; ++h) {
        for (int i = 1; i < cache.length(l); ++i) {
          EXPECT_LT(cache.Position(l, h, i - 1), cache.Position(l, h, i)) << name;
        }
      }
    }
  }
}

TEST_F(MethodTest, RippleAndMapUseTheGivenBudgetsExactly) {
  worker::KvCache cache(model_.config, kPrompt + kDecode);
  auto report = Run("ripple+snapkv", 32, cache, kRippleMap);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->kept, kRippleMap);
}

TEST_F(MethodTest, SnapKvKeepsTheObservationWindowInEveryLayerAndHead) {
  worker::KvCache cache(model_.config, kPrompt + kDecode);
  ASSERT_TRUE(Run("pyramid+snapkv", 20, cache).ok());
  for (int l = 0; l < 4; ++l) {
    for (int h = 0; h < 2; ++h) {
      const int len = cache.length(l);
      for (int i = 0; i < options_.window; ++i) {
        EXPECT_EQ(cache.Position(l, h, len - options_.window + i), kPrompt - options_.window + i)
            << "layer " << l << " head " << h;
      }
    }
  }
}

TEST_F(MethodTest, StreamingKeepsSinksAndRecentTokens) {
  worker::KvCache cache(model_.config, kPrompt + kDecode);
  ASSERT_TRUE(Run("streaming", 10, cache).ok());
  const std::vector<int32_t> expected{0, 1, 2, 3, 58, 59, 60, 61, 62, 63};
  for (int l = 0; l < 4; ++l) {
    for (int h = 0; h < 2; ++h) {
      std::vector<int32_t> got;
      for (int i = 0; i < cache.length(l); ++i) got.push_back(cache.Position(l, h, i));
      EXPECT_EQ(got, expected);
    }
  }
}

TEST_F(MethodTest, FullAndGenerousBudgetsDecodeBitIdenticallyToTheUncompressedCache) {
  worker::KvCache plain(model_.config, kPrompt + kDecode);
  ASSERT_TRUE(
      transformer_.Forward({.tokens = prompt(), .logits = worker::LogitRows::kNone}, plain).ok());
  auto reference = Decode(plain);
  ASSERT_TRUE(reference.ok());
  for (const char* name : {"full", "uniform+snapkv", "cake", "h2o", "streaming"}) {
    worker::KvCache cache(model_.config, kPrompt + kDecode);
    auto report = Run(name, kPrompt + 7, cache);  // budget above the prompt: keep everything
    ASSERT_TRUE(report.ok()) << name << ": " << report.status();
    EXPECT_EQ(report->kept, std::vector<int>(4, kPrompt)) << name;
    auto logits = Decode(cache);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(0, std::memcmp(logits->data(), reference->data(), reference->numel() * sizeof(float)))
        << name;
  }
}

TEST_F(MethodTest, DecodingOnACompressedCacheUsesTruePositions) {
  worker::KvCache cache(model_.config, kPrompt + kDecode);
  auto report = Run("uniform+snapkv", 16, cache);
  ASSERT_TRUE(report.ok()) << report.status();
  auto logits = Decode(cache);
  ASSERT_TRUE(logits.ok()) << logits.status();
  for (float v : logits->span()) ASSERT_TRUE(std::isfinite(v));
  for (int l = 0; l < 4; ++l) {
    ASSERT_EQ(cache.length(l), 16 + kDecode);
    EXPECT_EQ(cache.Position(l, 0, 16), kPrompt) << "decoded tokens continue at n";
    EXPECT_EQ(cache.Position(l, 0, 16 + kDecode - 1), kPrompt + kDecode - 1);
  }
  // Compression changed what the model sees: the logits differ from the full cache's.
  worker::KvCache plain(model_.config, kPrompt + kDecode);
  ASSERT_TRUE(
      transformer_.Forward({.tokens = prompt(), .logits = worker::LogitRows::kNone}, plain).ok());
  auto reference = Decode(plain);
  ASSERT_TRUE(reference.ok());
  double max_diff = 0;
  for (int64_t i = 0; i < reference->numel(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(logits->data()[i]) - reference->data()[i]));
  }
  EXPECT_GT(max_diff, 1e-4);
}

TEST_F(MethodTest, PlanningErrorsAreClear) {
  worker::KvCache cache(model_.config, kPrompt);
  auto p = PrefillObserved(transformer_, prompt(), {.window = 8, .accumulated = true}, cache);
  ASSERT_TRUE(p.ok());
  // A map-based method without a map, or with the wrong total.
  auto no_map = PlanBudgets(*ParseMethod("ripple+snapkv"), 32, p->layers, options_);
  EXPECT_EQ(no_map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_map.status().message()), ::testing::HasSubstr("budget map"));
  auto wrong_total =
      PlanBudgets(*ParseMethod("ripple+snapkv"), 30, p->layers, options_, kRippleMap);
  EXPECT_EQ(wrong_total.status().code(), absl::StatusCode::kInvalidArgument);
  // An average below the observation window.
  EXPECT_EQ(PlanBudgets(*ParseMethod("snapkv"), 7, p->layers, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // CAKE allocation without window statistics.
  worker::KvCache bare(model_.config, kPrompt);
  auto q = PrefillObserved(transformer_, prompt(), {.window_stats = false}, bare);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(PlanBudgets(*ParseMethod("cake"), 32, q->layers, options_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Budgets of the wrong size, a budget below the window, a cache that does not match.
  const Method snap = *ParseMethod("snapkv");
  EXPECT_EQ(
      CompressCache(snap, std::vector<int>{32, 32}, p->layers, options_, cache).status().code(),
      absl::StatusCode::kInvalidArgument);
  auto below = CompressCache(snap, std::vector<int>{32, 4, 32, 32}, p->layers, options_, cache);
  EXPECT_EQ(below.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(below.status().message()), ::testing::HasSubstr("layer 1"));
  worker::KvCache other(model_.config, kPrompt);
  EXPECT_EQ(
      CompressCache(snap, std::vector<int>(4, 32), p->layers, options_, other).status().code(),
      absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ripplekv::eval
