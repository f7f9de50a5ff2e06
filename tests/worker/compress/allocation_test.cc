#include "worker/compress/allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace ripplekv::worker {
namespace {

int64_t Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(AllocationTest, UniformGivesEveryLayerTheAverage) {
  auto b = UniformBudgets(5, 40, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::vector<int>(5, 40));
}

TEST(AllocationTest, PyramidMatchesTheLinearScheduleOnAHandWorkedExample) {
  // L = 4, B = 48, w = 8, beta = 20, n = 1000. Prefix budget p = B - w = 40;
  // min_num = 40 / 20 = 2, max_num = 2 * 40 - 2 = 78 (< n - w: no clip);
  // step = (78 - 2) / 3 = 25.333...; layer l: 8 + 78 - 25.333 l
  //   = 86, 60.667, 35.333, 10 (sum 192 = 4 * 48).
  // Floors 86, 60, 35, 10 sum to 191; the one token left goes to the largest remainder (.667,
  // layer 1): 86, 61, 35, 10.
  auto b = PyramidBudgets(4, 48, 8, 20.0, {.min_budget = 8, .max_budget = 1000});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{86, 61, 35, 10}));
}

TEST(AllocationTest, PyramidClipsTheTopAtThePromptLengthLikeTheReference) {
  // L = 3, B = 60, w = 8, beta = 20, n = 100. p = 52; min_num = 2.6, max_num = 101.4 > n - w = 92,
  // so max_num = 92 and min_num = 2 * 52 - 92 = 12; step = (92 - 12) / 2 = 40;
  // layers: 8 + 92, 8 + 52, 8 + 12 = 100, 60, 20 (sum 180 = 3 * 60).
  auto b = PyramidBudgets(3, 60, 8, 20.0, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{100, 60, 20}));
}

TEST(AllocationTest, PyramidTotalsAreExactForManyShapes) {
  for (int layers : {1, 2, 7, 30, 32}) {
    for (int average : {32, 33, 100, 257}) {
      for (double beta : {1.0, 5.0, 20.0}) {
        auto b = PyramidBudgets(layers, average, 32, beta, {.min_budget = 32, .max_budget = 512});
        ASSERT_TRUE(b.ok()) << b.status();
        EXPECT_EQ(Sum(*b), int64_t{layers} * average) << layers << " " << average << " " << beta;
        EXPECT_TRUE(std::is_sorted(b->rbegin(), b->rend())) << "pyramid decreases with depth";
        for (int x : *b) EXPECT_GE(x, 32);
      }
    }
  }
  EXPECT_EQ(PyramidBudgets(4, 48, 8, 0.5, {.min_budget = 8, .max_budget = 100}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AllocationTest, CakeSplitsTheTotalInProportionToPreferences) {
  // P = 1, 2, 3, 4 (sum 10), L * B = 4 * 25 = 100: shares 10, 20, 30, 40.
  auto b = CakeBudgets(std::vector<double>{1, 2, 3, 4}, 25, {.min_budget = 8, .max_budget = 1000});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{10, 20, 30, 40}));
}

TEST(AllocationTest, CakePreferencesFollowEntropyAndVarianceWithTemperatures) {
  // Two layers, window w' = 2 over a prompt of 3 (one prefix key), one head each.
  // Layer 0: window attention to the prefix key 0.2 and 0.6: sum 0.8, sum of squares 0.40,
  //   unbiased variance (0.40 - 0.8^2 / 2) / 1 = 0.08; entropy H = 4 (given).
  // Layer 1: attention 0.1 and 0.5: sum 0.6, squares 0.26, variance (0.26 - 0.18) / 1 = 0.08;
  //   H = 9.
  // tau1 = 2, tau2 = 1: P = sqrt(H) * V = 2 * 0.08 = 0.16 and 3 * 0.08 = 0.24.
  // L * B = 2 * 50 = 100 split 0.4 / 0.6: 40, 60.
  std::vector<LayerStats> layers(2);
  const double sums[2] = {0.8, 0.6}, squares[2] = {0.40, 0.26}, entropy[2] = {4.0, 9.0};
  for (int l = 0; l < 2; ++l) {
    layers[l] = {.n_heads = 1,
                 .n_kv_heads = 1,
                 .length = 3,
                 .window = 2,
                 .window_sum = {sums[l], 0.5, 0.5},
                 .window_sumsq = {squares[l], 0.1, 0.1},
                 .window_entropy = entropy[l]};
  }
  auto pref = CakePreferences(layers, 2.0, 1.0);
  ASSERT_TRUE(pref.ok()) << pref.status();
  EXPECT_NEAR((*pref)[0], 0.16, 1e-12);
  EXPECT_NEAR((*pref)[1], 0.24, 1e-12);
  auto b = CakeBudgets(*pref, 50, {.min_budget = 2, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{40, 60}));

  EXPECT_EQ(CakePreferences(layers, 0.0, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  layers[1].window = 0;
  EXPECT_EQ(CakePreferences(layers, 1.0, 1.0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(AllocationTest, ClampedSurplusIsRedistributedByWaterFilling) {
  // P = 1, 1, 1, 7, L * B = 100, n = 50: shares 10, 10, 10, 70; layer 3 is clamped to 50 and
  // the other 50 tokens are split evenly over layers 0-2 (16.667 each): floors 16, 16, 16 + 50 =
  // 98; the two tokens left go to the equal remainders in layer order: 17, 17, 16, 50.
  auto b = CakeBudgets(std::vector<double>{1, 1, 1, 7}, 25, {.min_budget = 8, .max_budget = 50});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{17, 17, 16, 50}));
  // P = 0, 1, 1, 1, L * B = 80, minimum 8: layer 0 is raised to 8, the rest share 72: 24 each.
  b = CakeBudgets(std::vector<double>{0, 1, 1, 1}, 20, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{8, 24, 24, 24}));
}

TEST(AllocationTest, FlatOrInvalidPreferencesFallBackToUniform) {
  auto b = CakeBudgets(std::vector<double>{0, 0, 0}, 30, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::vector<int>(3, 30));
}

TEST(AllocationTest, GivenMapIsUsedAsIsWhenItFits) {
  auto b = MapBudgets(std::vector<int>{10, 30, 20}, 20, {.min_budget = 4, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{10, 30, 20}));
}

TEST(AllocationTest, GivenMapWithAnotherTotalIsInvalidArgumentNamingBothTotals) {
  auto b = MapBudgets(std::vector<int>{10, 20}, 20, {.min_budget = 4, .max_budget = 100});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()),
              ::testing::AllOf(::testing::HasSubstr("totals 30"), ::testing::HasSubstr("40")));
  EXPECT_EQ(MapBudgets(std::vector<int>{-1, 41}, 20, {.min_budget = 0, .max_budget = 100})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AllocationTest, GivenMapAboveThePromptLengthIsClampedAndRedistributed) {
  // Map 10, 70 (average 40) for a prompt of 60: layer 1 keeps 60; its 10 surplus tokens go to
  // layer 0 (proportional water-filling: c * 10 + 60 = 80, c = 2): 20, 60.
  auto b = MapBudgets(std::vector<int>{10, 70}, 40, {.min_budget = 4, .max_budget = 60});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{20, 60}));
}

TEST(AllocationTest, AverageAtOrAboveThePromptKeepsEverythingEverywhere) {
  const BudgetBounds bounds{.min_budget = 8, .max_budget = 50};
  for (auto b : {UniformBudgets(3, 80, bounds), PyramidBudgets(3, 80, 8, 20.0, bounds),
                 CakeBudgets(std::vector<double>{1, 5, 9}, 80, bounds),
                 MapBudgets(std::vector<int>{40, 100, 100}, 80, bounds)}) {
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(*b, std::vector<int>(3, 50));
  }
}

TEST(AllocationTest, AverageBelowTheSelectionMinimumIsInvalidArgument) {
  const BudgetBounds bounds{.min_budget = 32, .max_budget = 512};
  auto b = UniformBudgets(4, 16, bounds);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), ::testing::HasSubstr("32"));
  EXPECT_EQ(PyramidBudgets(4, 16, 32, 20.0, bounds).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AllocationTest, FitBudgetsSumsExactlyWithinBoundsOnRandomTargets) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 40);
    const int lo = static_cast<int>(rng() % 20), hi = lo + static_cast<int>(rng() % 200);
    const int64_t total =
        int64_t{layers} * lo + static_cast<int64_t>(rng() % (int64_t{layers} * (hi - lo) + 1));
    std::vector<double> targets(layers);
    for (double& t : targets) t = trial % 7 == 0 ? 0.0 : std::pow(u(rng), 3);
    auto b = FitBudgets(targets, total, {.min_budget = lo, .max_budget = hi});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(Sum(*b), total) << "trial " << trial;
    for (int x : *b) {
      EXPECT_GE(x, lo);
      EXPECT_LE(x, hi);
    }
  }
}

TEST(AllocationTest, FitBudgetsRejectsInfeasibleTotalsAndBadTargets) {
  const BudgetBounds bounds{.min_budget = 10, .max_budget = 20};
  EXPECT_EQ(FitBudgets(std::vector<double>{1, 1}, 41, bounds).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitBudgets(std::vector<double>{1, 1}, 19, bounds).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitBudgets(std::vector<double>{1, std::nan("")}, 30, bounds).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitBudgets(std::vector<double>{}, 0, bounds).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
