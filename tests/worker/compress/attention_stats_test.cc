#include "worker/compress/attention_stats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/worker/compress/naive_attention.h"

namespace ripplekv::worker {
namespace {

using testing::NaiveAttention;
using testing::RandomCache;
using testing::RandomQueries;
using testing::SmallConfig;

constexpr int kHeads = 4, kKvHeads = 2, kDim = 16, kLength = 37, kWindow = 8;

struct Fixture {
  ModelConfig config = SmallConfig(kHeads, kKvHeads, kDim);
  std::mt19937_64 rng{11};
  KvCache cache = RandomCache(config, kLength, rng);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
};

kernels::ConstTensorView View(const std::vector<float>& q, int rows) {
  return {q.data(), {rows, kHeads, kDim}};
}

TEST(AttentionStatsTest, WindowStatisticsEqualTheNaiveAttentionMatrix) {
  Fixture f;
  const auto q = RandomQueries(kWindow, kHeads, kDim, f.rng, 2.0f);
  LayerStats stats;
  ASSERT_TRUE(ComputeWindowStats(View(q, kWindow), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).ok());
  EXPECT_EQ(stats.window, kWindow);
  EXPECT_EQ(stats.length, kLength);
  EXPECT_EQ(stats.prefix_end(), kLength - kWindow);

  const auto attn = NaiveAttention(q, kWindow, kLength - kWindow, kHeads, f.cache, 0);
  double entropy = 0;
  for (int h = 0; h < kHeads; ++h) {
    for (int j = 0; j < kLength; ++j) {
      double sum = 0, sumsq = 0;
      for (int i = 0; i < kWindow; ++i) {
        const double a = attn[h][i][j];
        sum += a;
        sumsq += a * a;
        if (j < kLength - kWindow) entropy -= a * std::log(a + 1e-10);
      }
      EXPECT_NEAR(stats.window_sum[h * kLength + j], sum, 1e-12) << "head " << h << " key " << j;
      EXPECT_NEAR(stats.window_sumsq[h * kLength + j], sumsq, 1e-12);
    }
  }
  EXPECT_NEAR(stats.window_entropy, entropy, 1e-9);
  // Only the last window query sees the last key.
  EXPECT_NEAR(stats.window_sum[kLength - 1], attn[0][kWindow - 1][kLength - 1], 1e-15);
}

TEST(AttentionStatsTest, TemporalShiftIsTheUnbiasedWindowVarianceOverThePrefix) {
  Fixture f;
  const auto q = RandomQueries(kWindow, kHeads, kDim, f.rng, 2.0f);
  LayerStats stats;
  ASSERT_TRUE(ComputeWindowStats(View(q, kWindow), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).ok());
  const auto attn = NaiveAttention(q, kWindow, kLength - kWindow, kHeads, f.cache, 0);
  double total = 0;
  for (int h = 0; h < kHeads; ++h) {
    for (int j = 0; j < kLength - kWindow; ++j) {
      double mean = 0;
      for (int i = 0; i < kWindow; ++i) mean += attn[h][i][j] / kWindow;
      double var = 0;
      for (int i = 0; i < kWindow; ++i) var += (attn[h][i][j] - mean) * (attn[h][i][j] - mean);
      total += var / (kWindow - 1);
    }
  }
  EXPECT_GT(total, 0.0);
  EXPECT_NEAR(TemporalShift(stats), total, 1e-12 + 1e-9 * total);
}

TEST(AttentionStatsTest, AccumulatedAttentionSumsAllQueriesAndTheGroupsHeads) {
  Fixture f;
  const auto q = RandomQueries(kLength, kHeads, kDim, f.rng, 2.0f);
  LayerStats stats;
  ASSERT_TRUE(
      ComputeAccumulatedAttention(View(q, kLength), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).ok());
  const auto attn = NaiveAttention(q, kLength, 0, kHeads, f.cache, 0);
  for (int kvh = 0; kvh < kKvHeads; ++kvh) {
    for (int j = 0; j < kLength; ++j) {
      double acc = 0;
      for (int h = kvh * 2; h < kvh * 2 + 2; ++h)
        for (int i = 0; i < kLength; ++i) acc += attn[h][i][j];
      EXPECT_NEAR(stats.accumulated[kvh * kLength + j], acc, 1e-10) << "kv head " << kvh;
    }
  }
  // Every query's attention sums to one: the total is n per query head.
  double total = 0;
  for (double a : stats.accumulated) total += a;
  EXPECT_NEAR(total, static_cast<double>(kLength) * kHeads, 1e-9);
}

TEST(AttentionStatsTest, ResultsDoNotDependOnThreadCount) {
  Fixture f;
  const auto q = RandomQueries(kLength, kHeads, kDim, f.rng);
  LayerStats one, two;
  const kernels::ConstTensorView window(q.data() + (kLength - kWindow) * kHeads * kDim,
                                        {kWindow, kHeads, kDim});
  ASSERT_TRUE(ComputeWindowStats(window, f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, one).ok());
  ASSERT_TRUE(ComputeWindowStats(window, f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 2}, two).ok());
  ASSERT_TRUE(ComputeAccumulatedAttention(View(q, kLength), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, one).ok());
  ASSERT_TRUE(ComputeAccumulatedAttention(View(q, kLength), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 2}, two).ok());
  EXPECT_EQ(one.window_sum, two.window_sum);
  EXPECT_EQ(one.window_sumsq, two.window_sumsq);
  EXPECT_EQ(one.window_entropy, two.window_entropy);
  EXPECT_EQ(one.accumulated, two.accumulated);
}

TEST(AttentionStatsTest, RejectsAWindowLongerThanTheCacheAndBadShapes) {
  Fixture f;
  const auto q = RandomQueries(kLength + 1, kHeads, kDim, f.rng);
  LayerStats stats;
  EXPECT_EQ(ComputeWindowStats(View(q, kLength + 1), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).code(),
            absl::StatusCode::kInvalidArgument);
  const kernels::ConstTensorView wrong_dim(q.data(), {4, kHeads, kDim / 2});
  EXPECT_EQ(ComputeWindowStats(wrong_dim, f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ComputeAccumulatedAttention(View(q, kLength - 1), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(AttentionStatsTest, TemporalShiftIsZeroForASingleQueryWindow) {
  Fixture f;
  const auto q = RandomQueries(1, kHeads, kDim, f.rng);
  LayerStats stats;
  ASSERT_TRUE(ComputeWindowStats(View(q, 1), f.cache.View(0), f.scale, kernels::OpContext{.num_threads = 1}, stats).ok());
  EXPECT_EQ(TemporalShift(stats), 0.0);
  EXPECT_GT(stats.window_entropy, 0.0);
}

}  // namespace
}  // namespace ripplekv::worker
