#include "eval/compress/allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace ripplekv::eval {
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
  // L = 3, B = 60, w = 8, beta = 20, n = 104 (= 2p, the shortest prompt that gets the pyramid).
  // p = 52; min_num = 2.6, max_num = 101.4 > n - w = 96, so max_num = 96 and
  // min_num = 2 * 52 - 96 = 8; step = (96 - 8) / 2 = 44;
  // layers: 8 + 96, 8 + 52, 8 + 8 = 104, 60, 16 (sum 180 = 3 * 60).
  auto b = PyramidBudgets(3, 60, 8, 20.0, {.min_budget = 8, .max_budget = 104});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{104, 60, 16}));
}

TEST(AllocationTest, PyramidFallsBackToUniformForPromptsShorterThanTwiceThePrefixBudget) {
  // L = 4, B = 48, w = 8: p = 40, the reference's threshold 2p = 80.
  // n = 79 < 80: every layer B = 48 (SnapKV-like).
  auto b = PyramidBudgets(4, 48, 8, 20.0, {.min_budget = 8, .max_budget = 79});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::vector<int>(4, 48));
  // n = 80: the pyramid. min_num = 2, max_num = 78 > n - w = 72, so max_num = 72 and
  // min_num = 80 - 72 = 8; step = (72 - 8) / 3 = 21.333; reals 80, 58.667, 37.333, 16 (sum 192).
  // Floors 80, 58, 37, 16 sum to 191; the last token goes to the largest remainder (layer 1).
  b = PyramidBudgets(4, 48, 8, 20.0, {.min_budget = 8, .max_budget = 80});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{80, 59, 37, 16}));
  // No prefix budget (B <= w, a selection whose minimum is below the window): every layer B.
  b = PyramidBudgets(4, 5, 8, 20.0, {.min_budget = 1, .max_budget = 1000});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::vector<int>(4, 5));
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

TEST(AllocationTest, CakeSplitsThePrefixBudgetByPreferenceAndKeepsTheWindowOnTop) {
  // P = 1, 2, 3, 4 (sum 10), L = 4, B = 25, w = 8, n = 1000: prefix budget T = (25 - 8) * 4 = 68;
  // shares 6.8, 13.6, 20.4, 27.2, truncated 6, 13, 20, 27 (sum 66); cap n - w = 992, no excess;
  // diff 68 - 66 = 2 over the 4 layers below the cap: 2 / 4 = 0 each, remainder 2 to layers 0, 1:
  // 7, 14, 20, 27; kept 8 + each: 15, 22, 28, 35 (sum 100 = 4 * 25).
  auto b =
      CakeBudgets(std::vector<double>{1, 2, 3, 4}, 25, 8, {.min_budget = 8, .max_budget = 1000});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{15, 22, 28, 35}));
}

TEST(AllocationTest, CakeGivesTheTruncationRemainderToTheFirstLayersNotTheLargestRemainders) {
  // P = 4, 2, 1 (sum 7), L = 3, B = 20, w = 4, n = 100: T = 16 * 3 = 48; shares 27.429, 13.714,
  // 6.857, truncated 27, 13, 6 (sum 46); diff 2 over the 3 layers below the cap 96: 0 each,
  // remainder 2 to layers 0 and 1 (largest remainder would pick layers 2 and 1): 28, 14, 6;
  // kept 32, 18, 10 (sum 60 = 3 * 20).
  auto b = CakeBudgets(std::vector<double>{4, 2, 1}, 20, 4, {.min_budget = 4, .max_budget = 100});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{32, 18, 10}));
}

TEST(AllocationTest, CakePreferencesFollowEntropyAndVarianceWithTemperatures) {
  // Two layers, window w' = 2 over a prompt of 3 (one prefix key), one head each.
  // Layer 0: window attention to the prefix key 0.2 and 0.6: sum 0.8, sum of squares 0.40,
  //   unbiased variance (0.40 - 0.8^2 / 2) / 1 = 0.08; entropy H = 4 (given).
  // Layer 1: attention 0.1 and 0.5: sum 0.6, squares 0.26, variance (0.26 - 0.18) / 1 = 0.08;
  //   H = 9.
  // tau1 = 2, tau2 = 1: P = sqrt(H) * V = 2 * 0.08 = 0.16 and 3 * 0.08 = 0.24.
  // CAKE with w = 2, B = 50: T = (50 - 2) * 2 = 96 split 0.4 / 0.6: 38.4, 57.6, truncated 38, 57;
  // diff 1 to layer 0: 39, 57; kept 41, 59.
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
  auto b = CakeBudgets(*pref, 50, 2, {.min_budget = 2, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{41, 59}));

  EXPECT_EQ(CakePreferences(layers, 0.0, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  layers[1].window = 0;
  EXPECT_EQ(CakePreferences(layers, 1.0, 1.0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(AllocationTest, CakeSpreadsTheExcessOverTheCapEvenly) {
  // P = 3, 7, 9, 61 (sum 80), L = 4, B = 14, w = 4, n = 24: T = 10 * 4 = 40, cap n - w = 20;
  // shares 1.5, 3.5, 4.5, 30.5, truncated 1, 3, 4, 30. Layer 3 is capped at 20, excess 10 over
  // the 3 layers below the cap: 10 / 3 = 3 each, remainder 1 to layer 0: 5, 6, 7, 20 (sum 38).
  // diff 2 over layers 0-2: 0 each, remainder to layers 0 and 1: 6, 7, 7, 20; kept 10, 11, 11, 24
  // (sum 56 = 4 * 14). A proportional split of L * B would give 5, 12, 15, 24.
  auto b =
      CakeBudgets(std::vector<double>{3, 7, 9, 61}, 14, 4, {.min_budget = 4, .max_budget = 24});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{10, 11, 11, 24}));
  // P = 1, 1, 1, 7, L = 4, B = 25, w = 8, n = 50: T = 68, cap 42; shares 6.8, 6.8, 6.8, 47.6,
  // truncated 6, 6, 6, 47; layer 3 capped at 42, excess 5: 1 each, remainder 2 to layers 0, 1:
  // 8, 8, 7, 42 (sum 65); diff 3 over layers 0-2: 1 each: 9, 9, 8, 42; kept 17, 17, 16, 50.
  b = CakeBudgets(std::vector<double>{1, 1, 1, 7}, 25, 8, {.min_budget = 8, .max_budget = 50});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{17, 17, 16, 50}));
}

TEST(AllocationTest, CakeReapportionsWhenTheEvenSpreadLiftsALayerAboveThePrompt) {
  // Corner case of the reference: the excess spread lifts a layer past the cap.
  // P = 61, 29, 0 (sum 90), L = 3, B = 19, w = 4, n = 20: T = 15 * 3 = 45, cap 16; shares 30.5,
  // 14.5, 0, truncated 30, 14, 0; layer 0 capped at 16, excess 14 over layers 1 and 2: 7 each:
  // 16, 21, 7 (sum 44); diff 1 to layer 2, the only one below the cap: 16, 21, 8; kept 20, 25, 12.
  // Layer 1 exceeds n = 20 (the reference would clip it and leave 5 tokens unspent). FitBudgets
  // with targets 20, 25, 12 and total 57: layers 0 and 1 clamp at 20, layer 2 gets 17.
  auto b = CakeBudgets(std::vector<double>{61, 29, 0}, 19, 4, {.min_budget = 4, .max_budget = 20});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{20, 20, 17}));
  // The same through the diff step. P = 98, 8, 107, 107 (sum 320), L = 4, B = 10, w = 2, n = 12:
  // T = 8 * 4 = 32, cap 10; shares 9.8, 0.8, 10.7, 10.7, truncated 9, 0, 10, 10 (sum 29), no
  // excess; diff 3 over the layers below the cap (0 and 1): 1 each, remainder 1 to layer 0:
  // 11, 1, 10, 10; kept 13, 3, 12, 12, layer 0 above n = 12. FitBudgets with targets 13, 3, 12, 12
  // and total 40: layers 0, 2, 3 clamp at 12, layer 1 gets 4.
  b = CakeBudgets(std::vector<double>{98, 8, 107, 107}, 10, 2, {.min_budget = 2, .max_budget = 12});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{12, 4, 12, 12}));
}

TEST(AllocationTest, CakeReapportionsWhenTheSelectionMinimumExceedsTheWindow) {
  // StreamingLLM with 6 sinks under a CAKE allocation with w = 4. P = 1, 0, 0, L = 3, B = 10,
  // n = 100: T = 6 * 3 = 18, shares 18, 0, 0; kept 22, 4, 4, below the minimum 6. FitBudgets
  // with targets 22, 4, 4 and total 30: layers 1 and 2 raised to 6, layer 0 keeps 18.
  auto b = CakeBudgets(std::vector<double>{1, 0, 0}, 10, 4, {.min_budget = 6, .max_budget = 100});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<int>{18, 6, 6}));
}

TEST(AllocationTest, CakeAdjustSpreadsANegativeDifferenceOverLayersAboveOne) {
  // Budgets 5, 1, 7 for a total of 10 (cap 100, no excess): diff 10 - 13 = -3 over the layers
  // above 1 (0 and 2): 3 / 2 = 1 each, remainder 1 from layer 0: 3, 1, 6. CakeBudgets itself
  // never reaches this branch: its truncated shares sum to at most T.
  EXPECT_EQ(CakeAdjustBudgets(std::vector<int64_t>{5, 1, 7}, 10, 100),
            (std::vector<int64_t>{3, 1, 6}));
  // Positive diff with every layer at the cap: unchanged, as in the reference.
  EXPECT_EQ(CakeAdjustBudgets(std::vector<int64_t>{9, 9}, 20, 9), (std::vector<int64_t>{9, 9}));
}

TEST(AllocationTest, CakeAtOrBelowTheWindowGivesEveryLayerTheAverage) {
  // B == w = 8: T = 0, every share 0, every layer keeps its window: 8, 8, 8.
  auto b = CakeBudgets(std::vector<double>{1, 5, 9}, 8, 8, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::vector<int>(3, 8));
  // B = 5 < w = 8 (an H2O selection, minimum 1): no prefix budget, every layer 5.
  b = CakeBudgets(std::vector<double>{1, 5, 9}, 5, 8, {.min_budget = 1, .max_budget = 100});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::vector<int>(3, 5));
}

TEST(AllocationTest, CakeKeepsTheWindowAndTheExactTotalOnRandomPreferences) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int trial = 0; trial < 2000; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 40);
    const int w = 1 + static_cast<int>(rng() % 64);
    const int n = w + 1 + static_cast<int>(rng() % 600);
    const int average = w + static_cast<int>(rng() % (n - w + 20));
    std::vector<double> pref(layers);
    for (double& p : pref) p = trial % 11 == 0 || rng() % 5 == 0 ? 0.0 : std::pow(u(rng), 4);
    auto b = CakeBudgets(pref, average, w, {.min_budget = w, .max_budget = n});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(Sum(*b), int64_t{layers} * std::min(average, n)) << "trial " << trial;
    for (int x : *b) {
      EXPECT_GE(x, w) << "trial " << trial;
      EXPECT_LE(x, n) << "trial " << trial;
    }
  }
}

TEST(AllocationTest, FlatOrInvalidPreferencesFallBackToUniform) {
  // All-zero preferences: T / L = (30 - 8) * 3 / 3 = 22 each, kept 30 each.
  auto b = CakeBudgets(std::vector<double>{0, 0, 0}, 30, 8, {.min_budget = 8, .max_budget = 100});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::vector<int>(3, 30));
  b = CakeBudgets(std::vector<double>{1, std::nan(""), 2}, 30, 8,
                  {.min_budget = 8, .max_budget = 100});
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
                 CakeBudgets(std::vector<double>{1, 5, 9}, 80, 8, bounds),
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
}  // namespace ripplekv::eval
