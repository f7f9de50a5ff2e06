#include "worker/compress/selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tests/worker/compress/naive_attention.h"

namespace ripplekv::worker {
namespace {

using testing::NaiveAttention;
using testing::RandomCache;
using testing::RandomQueries;
using testing::SmallConfig;
using Keep = std::vector<std::vector<int32_t>>;

constexpr int kHeads = 6, kKvHeads = 2, kGroup = 3, kDim = 8, kLength = 45, kWindow = 6;

// Layer statistics from random queries and keys, plus the naive attention they came from.
struct Layer {
  LayerStats stats;
  std::vector<std::vector<std::vector<double>>> window_attn;  // [h][window query][key]
  std::vector<std::vector<std::vector<double>>> all_attn;     // [h][query][key]
};

Layer MakeLayer(uint64_t seed) {
  const ModelConfig config = SmallConfig(kHeads, kKvHeads, kDim);
  std::mt19937_64 rng(seed);
  KvCache cache = RandomCache(config, kLength, rng);
  const auto q = RandomQueries(kLength, kHeads, kDim, rng, 2.5f);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  Layer layer;
  const kernels::ConstTensorView window(q.data() + (kLength - kWindow) * kHeads * kDim,
                                        {kWindow, kHeads, kDim});
  EXPECT_TRUE(ComputeWindowStats(window, cache.View(0), scale, kernels::OpContext{.num_threads = 1}, layer.stats).ok());
  EXPECT_TRUE(ComputeAccumulatedAttention({q.data(), {kLength, kHeads, kDim}}, cache.View(0), scale,
                                          kernels::OpContext{.num_threads = 1}, layer.stats)
                  .ok());
  layer.all_attn = NaiveAttention(q, kLength, 0, kHeads, cache, 0);
  for (auto& head : layer.all_attn) {
    layer.window_attn.emplace_back(head.end() - kWindow, head.end());
  }
  return layer;
}

// PyTorch-style 1-D pooling over an explicitly padded copy: max pads with -inf, avg pads with 0
// and divides by the kernel (count_include_pad).
std::vector<double> BrutePool(const std::vector<double>& x, bool max, int kernel) {
  const int pad = kernel / 2;
  std::vector<double> padded(x.size() + 2 * pad,
                             max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::copy(x.begin(), x.end(), padded.begin() + pad);
  std::vector<double> out(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int t = 0; t < kernel; ++t) acc = max ? std::max(acc, padded[j + t]) : acc + padded[j + t];
    out[j] = max ? acc : acc / kernel;
  }
  return out;
}

// The k best entries by (score desc, index asc), plus every index in [tail_begin, n), sorted.
std::vector<int32_t> BruteTop(const std::vector<double>& score, int k, int tail_begin, int n) {
  std::vector<std::pair<double, int>> order;
  for (int j = 0; j < static_cast<int>(score.size()); ++j) order.push_back({-score[j], j});
  std::sort(order.begin(), order.end());
  std::vector<int32_t> keep;
  for (int i = 0; i < k; ++i) keep.push_back(order[i].second);
  for (int j = tail_begin; j < n; ++j) keep.push_back(j);
  std::sort(keep.begin(), keep.end());
  return keep;
}

Keep BruteSnapKv(const Layer& layer, int budget, bool max_pool, int kernel) {
  const int prefix = kLength - kWindow;
  Keep keep(kKvHeads);
  for (int kvh = 0; kvh < kKvHeads; ++kvh) {
    std::vector<double> votes(prefix, 0.0);
    for (int h = kvh * kGroup; h < (kvh + 1) * kGroup; ++h)
      for (int i = 0; i < kWindow; ++i)
        for (int j = 0; j < prefix; ++j) votes[j] += layer.window_attn[h][i][j];
    keep[kvh] = BruteTop(BrutePool(votes, max_pool, kernel), budget - kWindow, prefix, kLength);
  }
  return keep;
}

Keep BruteCake(const Layer& layer, int budget, double gamma, int kernel) {
  const int prefix = kLength - kWindow;
  Keep keep(kKvHeads);
  for (int kvh = 0; kvh < kKvHeads; ++kvh) {
    std::vector<double> score(prefix, 0.0);
    for (int h = kvh * kGroup; h < (kvh + 1) * kGroup; ++h) {
      std::vector<double> indicator(prefix);
      for (int j = 0; j < prefix; ++j) {
        double mean = 0, var = 0;
        for (int i = 0; i < kWindow; ++i) mean += layer.window_attn[h][i][j] / kWindow;
        for (int i = 0; i < kWindow; ++i) {
          var += std::pow(layer.window_attn[h][i][j] - mean, 2) / (kWindow - 1);
        }
        indicator[j] = mean + gamma * var;
      }
      const auto pooled = BrutePool(indicator, /*max=*/false, kernel);
      for (int j = 0; j < prefix; ++j) score[j] += pooled[j] / kGroup;
    }
    keep[kvh] = BruteTop(score, budget - kWindow, prefix, kLength);
  }
  return keep;
}

Keep BruteH2o(const Layer& layer, int budget) {
  const int heavy = budget / 2, recent = budget - heavy;
  Keep keep(kKvHeads);
  for (int kvh = 0; kvh < kKvHeads; ++kvh) {
    std::vector<double> acc(kLength - recent, 0.0);
    for (int h = kvh * kGroup; h < (kvh + 1) * kGroup; ++h)
      for (int i = 0; i < kLength; ++i)
        for (int j = 0; j < kLength - recent; ++j) acc[j] += layer.all_attn[h][i][j];
    keep[kvh] = BruteTop(acc, heavy, kLength - recent, kLength);
  }
  return keep;
}

void ExpectValid(const Keep& keep, int budget) {
  ASSERT_EQ(static_cast<int>(keep.size()), kKvHeads);
  for (const auto& head : keep) {
    EXPECT_EQ(static_cast<int>(head.size()), std::min(budget, kLength));
    EXPECT_TRUE(std::is_sorted(head.begin(), head.end()));
    EXPECT_EQ(std::adjacent_find(head.begin(), head.end()), head.end()) << "duplicate index";
  }
}

TEST(SelectionTest, SnapKvEqualsBruteForceWithMaxAndAvgPooling) {
  for (uint64_t seed : {1, 2, 3}) {
    const Layer layer = MakeLayer(seed);
    for (int budget : {kWindow, kWindow + 1, 13, 24, kLength - 1}) {
      SelectionOptions max7;  // defaults: max-pool, kernel 7
      auto got = SelectTokens(SelectionKind::kSnapKv, layer.stats, budget, max7);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectValid(*got, budget);
      EXPECT_EQ(*got, BruteSnapKv(layer, budget, true, 7)) << "seed " << seed << " b " << budget;

      SelectionOptions avg5{.pool = PoolKind::kAvg, .pool_kernel = 5};
      got = SelectTokens(SelectionKind::kSnapKv, layer.stats, budget, avg5);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(*got, BruteSnapKv(layer, budget, false, 5)) << "seed " << seed << " b " << budget;
    }
  }
}

TEST(SelectionTest, SnapKvAlwaysKeepsTheWindowAndHeadsChooseIndependently) {
  const Layer layer = MakeLayer(4);
  bool heads_differ = false;
  for (int budget = kWindow; budget <= kLength + 3; ++budget) {
    auto keep = SelectTokens(SelectionKind::kSnapKv, layer.stats, budget, {});
    ASSERT_TRUE(keep.ok());
    ExpectValid(*keep, budget);
    for (const auto& head : *keep) {
      for (int j = kLength - kWindow; j < kLength; ++j) {
        EXPECT_TRUE(std::binary_search(head.begin(), head.end(), j)) << "window entry " << j;
      }
    }
    heads_differ = heads_differ || (*keep)[0] != (*keep)[1];
  }
  EXPECT_TRUE(heads_differ) << "per-KV-head selection should differ on random heads";
}

TEST(SelectionTest, CakeIndicatorEqualsBruteForce) {
  for (uint64_t seed : {5, 6}) {
    const Layer layer = MakeLayer(seed);
    for (int budget : {kWindow, 10, 20, 33}) {
      for (double gamma : {0.0, 200.0}) {
        SelectionOptions options{.cake_gamma = gamma};
        auto got = SelectTokens(SelectionKind::kCake, layer.stats, budget, options);
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectValid(*got, budget);
        EXPECT_EQ(*got, BruteCake(layer, budget, gamma, 5)) << "seed " << seed << " b " << budget;
      }
    }
  }
}

TEST(SelectionTest, H2oKeepsHeavyHittersOfAccumulatedAttentionPlusRecentTokens) {
  const Layer layer = MakeLayer(7);
  for (int budget : {1, 2, 9, 20, 44}) {
    auto got = SelectTokens(SelectionKind::kH2o, layer.stats, budget, {});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectValid(*got, budget);
    EXPECT_EQ(*got, BruteH2o(layer, budget)) << "budget " << budget;
  }
}

TEST(SelectionTest, H2oRecentTokensFixesTheRecentWindowAndGivesTheRestToHeavyHitters) {
  // One head over 10 tokens; accumulated attention by position.
  const LayerStats stats{.n_heads = 1,
                         .n_kv_heads = 1,
                         .length = 10,
                         .accumulated = {5, 1, 9, 2, 8, 3, 7, 4, 6, 0}};
  auto keep = [&](int budget, SelectionOptions o) {
    auto got = SelectTokens(SelectionKind::kH2o, stats, budget, o);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? (*got)[0] : std::vector<int32_t>{};
  };
  // Default split, b = 6: recent 7..9, heavy top 3 of 0..6 (9 at 2, 8 at 4, 7 at 6).
  EXPECT_EQ(keep(6, {}), (std::vector<int32_t>{2, 4, 6, 7, 8, 9}));
  // recent_tokens 2, b = 6: recent 8..9, heavy top 4 of 0..7 (adds 5 at 0); heavy_ratio unread.
  EXPECT_EQ(keep(6, {.recent_tokens = 2}), (std::vector<int32_t>{0, 2, 4, 6, 8, 9}));
  EXPECT_EQ(keep(6, {.heavy_ratio = 0.0, .recent_tokens = 2}),
            (std::vector<int32_t>{0, 2, 4, 6, 8, 9}));
  // recent_tokens 1, b = 4: recent 9, heavy top 3 of 0..8.
  EXPECT_EQ(keep(4, {.recent_tokens = 1}), (std::vector<int32_t>{2, 4, 6, 9}));
  // recent_tokens above the budget: the budget is all recent tokens.
  EXPECT_EQ(keep(3, {.recent_tokens = 8}), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(SelectTokens(SelectionKind::kH2o, stats, 4, {.recent_tokens = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SelectionTest, StreamingKeepsSinksAndTheMostRecentTokens) {
  const Layer layer = MakeLayer(8);
  auto keep = SelectTokens(SelectionKind::kStreaming, layer.stats, 10, {});
  ASSERT_TRUE(keep.ok());
  const std::vector<int32_t> expected{0, 1, 2, 3, 39, 40, 41, 42, 43, 44};
  EXPECT_EQ((*keep)[0], expected);
  EXPECT_EQ((*keep)[1], expected);
  keep = SelectTokens(SelectionKind::kStreaming, layer.stats, 4, {});
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ((*keep)[0], (std::vector<int32_t>{0, 1, 2, 3}));
  keep = SelectTokens(SelectionKind::kStreaming, layer.stats, 7, {.sinks = 0});
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ((*keep)[0], (std::vector<int32_t>{38, 39, 40, 41, 42, 43, 44}));
}

TEST(SelectionTest, BudgetsAtOrAboveThePromptKeepEverything) {
  const Layer layer = MakeLayer(9);
  std::vector<int32_t> all(kLength);
  std::iota(all.begin(), all.end(), 0);
  for (SelectionKind kind : {SelectionKind::kSnapKv, SelectionKind::kStreaming, SelectionKind::kH2o,
                             SelectionKind::kCake, SelectionKind::kFull}) {
    for (int budget : {kLength, kLength + 50}) {
      auto keep = SelectTokens(kind, layer.stats, budget, {});
      ASSERT_TRUE(keep.ok()) << SelectionName(kind);
      EXPECT_EQ((*keep)[0], all) << SelectionName(kind);
      EXPECT_EQ((*keep)[1], all) << SelectionName(kind);
    }
  }
}

TEST(SelectionTest, BudgetBelowTheWindowOrSinksIsInvalidArgumentNamingBoth) {
  const Layer layer = MakeLayer(10);
  auto snap = SelectTokens(SelectionKind::kSnapKv, layer.stats, kWindow - 1, {});
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(snap.status().message()),
              ::testing::AllOf(::testing::HasSubstr("budget 5"), ::testing::HasSubstr("6 tokens")));
  auto stream = SelectTokens(SelectionKind::kStreaming, layer.stats, 3, {});
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stream.status().message()), ::testing::HasSubstr("4 sink tokens"));
  EXPECT_EQ(SelectTokens(SelectionKind::kH2o, layer.stats, 0, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      SelectTokens(SelectionKind::kSnapKv, layer.stats, 10, {.pool_kernel = 4}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(SelectionTest, MissingStatisticsAreFailedPrecondition) {
  LayerStats bare{.n_heads = kHeads, .n_kv_heads = kKvHeads, .length = kLength};
  EXPECT_EQ(SelectTokens(SelectionKind::kSnapKv, bare, 10, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SelectTokens(SelectionKind::kH2o, bare, 10, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(SelectTokens(SelectionKind::kStreaming, bare, 10, {}).ok());
}

TEST(SelectionTest, InconsistentStatisticsAreInvalidArgument) {
  Layer layer = MakeLayer(12);
  LayerStats short_arrays = layer.stats;
  short_arrays.window_sum.pop_back();
  EXPECT_EQ(SelectTokens(SelectionKind::kSnapKv, short_arrays, 10, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LayerStats short_acc = layer.stats;
  short_acc.accumulated.resize(3);
  EXPECT_EQ(SelectTokens(SelectionKind::kH2o, short_acc, 10, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LayerStats bad_heads = layer.stats;
  bad_heads.n_kv_heads = 4;  // 6 query heads do not split into 4 groups
  EXPECT_EQ(SelectTokens(SelectionKind::kStreaming, bad_heads, 10, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LayerStats long_window = layer.stats;
  long_window.window = kLength + 1;
  EXPECT_EQ(SelectTokens(SelectionKind::kCake, long_window, 10, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SelectionTest, PoolingMatchesPyTorchPaddingOnAHandExample) {
  const std::vector<double> x{1, 3, 2, 5, 4};
  EXPECT_EQ(Pool1d(x, PoolKind::kMax, 3), (std::vector<double>{3, 3, 5, 5, 5}));
  const auto avg = Pool1d(x, PoolKind::kAvg, 3);
  const std::vector<double> expected{4.0 / 3, 6.0 / 3, 10.0 / 3, 11.0 / 3, 9.0 / 3};
  for (int j = 0; j < 5; ++j) EXPECT_DOUBLE_EQ(avg[j], expected[j]);
  EXPECT_EQ(Pool1d(x, PoolKind::kMax, 1), x);
}

TEST(SelectionTest, TopKBreaksTiesTowardTheLowerPosition) {
  const std::vector<double> scores{1, 2, 2, 0, 2};
  EXPECT_EQ(TopK(scores, 1), (std::vector<int32_t>{1}));
  EXPECT_EQ(TopK(scores, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(TopK(scores, 4), (std::vector<int32_t>{0, 1, 2, 4}));
  EXPECT_TRUE(TopK(scores, 0).empty());
}

TEST(SelectionTest, MinimumBudgetsPerSelection) {
  const SelectionOptions o;
  EXPECT_EQ(MinBudget(SelectionKind::kSnapKv, o, 32, 100), 32);
  EXPECT_EQ(MinBudget(SelectionKind::kSnapKv, o, 32, 20), 20);
  EXPECT_EQ(MinBudget(SelectionKind::kStreaming, o, 32, 100), 4);
  EXPECT_EQ(MinBudget(SelectionKind::kH2o, o, 32, 100), 1);
  EXPECT_EQ(MinBudget(SelectionKind::kFull, o, 32, 100), 100);
}

}  // namespace
}  // namespace ripplekv::worker
