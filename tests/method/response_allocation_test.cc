// The response allocation (method/response_allocation.h): interpolation in log-budget by hand,
// and the allocation against brute force (dynamic programming over every integer allocation) on
// small random cases: optimal on convex curves, bracketed by its hull bound on non-convex ones,
// always within bounds and summing exactly to the total.

#include "method/response_allocation.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/budget_map.h"

namespace ripplekv::method {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ResponseAllocationTest, InterpolatesLinearlyInLogBudget) {
  const ResponseCurve curve{.budgets = {16, 64}, .kl = {1.0, 0.0}};
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 16), 1.0);
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 32), 0.5);  // halfway in ln b
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 64), 0.0);
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 1000), 0.0);  // flat past the full cache
  // Below the grid the first segment's slope continues: one more halving, half a nat more.
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 8), 1.5);
  EXPECT_DOUBLE_EQ(InterpolateResponse(curve, 4), 2.0);
  // ...but a curve that rises with the budget does not fall below its first point.
  const ResponseCurve rising{.budgets = {16, 64}, .kl = {0.2, 0.5}};
  EXPECT_DOUBLE_EQ(InterpolateResponse(rising, 4), 0.2);
  const ResponseCurve single{.budgets = {32}, .kl = {0.7}};
  EXPECT_DOUBLE_EQ(InterpolateResponse(single, 1), 0.7);
  EXPECT_DOUBLE_EQ(InterpolateResponse(single, 99), 0.7);
}

TEST(ResponseAllocationTest, TheLayerThatLosesMoreGetsTheTokens) {
  // Layer 0 loses ten times what layer 1 loses at every budget: its marginal loss per token stays
  // larger until it holds the whole cache (10 tokens), so layer 1 keeps its minimum.
  const std::vector<ResponseCurve> curves = {{.budgets = {1, 10}, .kl = {10.0, 0.0}},
                                             {.budgets = {1, 10}, .kl = {1.0, 0.0}}};
  auto out = AllocateByResponse(curves, 11, {.min_tokens = 1, .max_tokens = 10});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->tokens, ElementsAre(10, 1));
  EXPECT_DOUBLE_EQ(out->predicted_kl, 1.0);
  EXPECT_DOUBLE_EQ(out->hull_kl, 1.0);
}

TEST(ResponseAllocationTest, EqualCurvesBreakTiesTowardTheLowerLayer) {
  const ResponseCurve curve{.budgets = {2, 32}, .kl = {1.0, 0.0}};
  const std::vector<ResponseCurve> curves(3, curve);
  auto out = AllocateByResponse(curves, 3 * 4 + 2, {.min_tokens = 4});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->tokens, ElementsAre(5, 5, 4));
}

TEST(ResponseAllocationTest, TokensPastEveryFullCacheStillSumToTheTotal) {
  const std::vector<ResponseCurve> curves = {{.budgets = {4, 16}, .kl = {1.0, 0.0}},
                                             {.budgets = {4, 16}, .kl = {2.0, 0.0}}};
  auto out = AllocateByResponse(curves, 50, {.min_tokens = 2});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens[0] + out->tokens[1], 50);
  EXPECT_GE(out->tokens[0], 16);
  EXPECT_GE(out->tokens[1], 16);
  EXPECT_DOUBLE_EQ(out->predicted_kl, 0.0);
}

TEST(ResponseAllocationTest, BadInputIsInvalidArgumentNamingIt) {
  const ResponseCurve good{.budgets = {4, 16}, .kl = {1.0, 0.0}};
  auto message = [](const StatusOr<ResponseAllocation>& out) {
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(out.status().message());
  };
  std::vector<ResponseCurve> curves = {good, {.budgets = {4, 4}, .kl = {1.0, 0.5}}};
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 1})),
              HasSubstr("layer 1: response curve: point 1: budget 4 does not rise above 4"));
  curves[1] = {.budgets = {4, 8}, .kl = {1.0, NAN}};
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 1})),
              HasSubstr("point 1 (budget 8): KL nan"));
  curves[1] = {.budgets = {0, 8}, .kl = {1.0, 0.0}};
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 1})), HasSubstr("budget 0"));
  curves[1] = {.budgets = {4, 8}, .kl = {1.0}};
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 1})),
              HasSubstr("2 budgets but 1 KL values"));
  curves[1] = good;
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 0})),
              HasSubstr("min_tokens 0 < 1"));
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 11})),
              HasSubstr("total 20 outside [2 * 11, 2 * unbounded]"));
  EXPECT_THAT(message(AllocateByResponse(curves, 20, {.min_tokens = 1, .max_tokens = 9})),
              HasSubstr("outside [2 * 1, 2 * 9]"));
  EXPECT_THAT(message(AllocateByResponse({}, 20, {.min_tokens = 1})), HasSubstr("no layers"));
  EXPECT_FALSE(AllocateByResponse(curves, kMaxApportionTotal + 1, {.min_tokens = 1}).ok());
}

TEST(ResponseAllocationTest, WithoutAnUpperBoundNoTokenIsForcedPastACurvesLowestPoint) {
  // Layer 0 is lowest at 8 tokens and rises after it (noise); layer 1 falls until its full cache.
  // The 10 tokens past both lowest points go to layer 1, where they change nothing, not to layer
  // 0, where they would cost (its curve rises again).
  const std::vector<ResponseCurve> curves = {{.budgets = {2, 8, 32}, .kl = {1.0, 0.2, 0.5}},
                                             {.budgets = {2, 32}, .kl = {1.0, 0.0}}};
  auto out = AllocateByResponse(curves, 50, {.min_tokens = 2});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->tokens, ElementsAre(8, 42));
  EXPECT_NEAR(out->predicted_kl, 0.2, 1e-12);
  EXPECT_NEAR(out->hull_kl, 0.2, 1e-12);
}

TEST(ResponseAllocationTest, FrontierFallsWithMemoryAndMatchesEachAllocation) {
  std::vector<ResponseCurve> curves = {{.budgets = {4, 16, 64}, .kl = {2.0, 0.8, 0.0}},
                                       {.budgets = {4, 16, 64}, .kl = {0.5, 0.1, 0.0}},
                                       {.budgets = {4, 16, 64}, .kl = {1.0, 0.6, 0.0}}};
  const std::vector<int64_t> averages = {4, 8, 16, 32, 64};
  const ApportionBounds bounds{.min_tokens = 4, .max_tokens = 64};
  auto frontier = ResponseFrontier(curves, averages, bounds);
  ASSERT_TRUE(frontier.ok()) << frontier.status();
  ASSERT_EQ(frontier->size(), averages.size());
  for (size_t i = 0; i < averages.size(); ++i) {
    const FrontierPoint& point = (*frontier)[i];
    EXPECT_EQ(point.average_tokens, averages[i]);
    auto map = AllocateByResponse(curves, 3 * averages[i], bounds);
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_EQ(point.tokens, map->tokens);
    EXPECT_EQ(point.predicted_kl, map->predicted_kl);
    if (i > 0) {
      EXPECT_LT(point.predicted_kl, (*frontier)[i - 1].predicted_kl);
    }
  }
  EXPECT_DOUBLE_EQ(frontier->front().predicted_kl, 3.5);  // everyone at 4 tokens
  EXPECT_DOUBLE_EQ(frontier->back().predicted_kl, 0.0);   // everyone at the full cache
  EXPECT_FALSE(ResponseFrontier(curves, std::vector<int64_t>{0}, bounds).ok());
  EXPECT_FALSE(ResponseFrontier(curves, std::vector<int64_t>{65}, bounds).ok());
}

TEST(ResponseAllocationTest, SmallestAverageForKlIsTheFirstBudgetThatReachesIt) {
  std::vector<ResponseCurve> curves = {{.budgets = {4, 16, 64}, .kl = {2.0, 0.8, 0.0}},
                                       {.budgets = {4, 16, 64}, .kl = {0.5, 0.1, 0.0}}};
  const ApportionBounds bounds{.min_tokens = 4};
  for (double max_kl : {3.0, 2.5, 1.0, 0.3, 0.05, 0.0}) {
    SCOPED_TRACE(testing::Message() << "max KL " << max_kl);
    auto found = SmallestAverageForKl(curves, max_kl, bounds);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_LE(found->predicted_kl, max_kl);
    if (found->average_tokens > bounds.min_tokens) {
      auto smaller = AllocateByResponse(curves, 2 * (found->average_tokens - 1), bounds);
      ASSERT_TRUE(smaller.ok());
      EXPECT_GT(smaller->predicted_kl, max_kl);
    }
  }
  auto first = SmallestAverageForKl(curves, 3.0, bounds);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->average_tokens, 4);  // 2.5 nats at the minimum already
  auto full = SmallestAverageForKl(curves, 0.0, bounds);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->average_tokens, 64);
  // A floor the curves never reach: every layer keeps 0.1 nats even with its full cache.
  curves[1].kl.back() = 0.1;
  auto unreachable = SmallestAverageForKl(curves, 0.05, bounds);
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unreachable.status().message()), HasSubstr("the lowest is 0.1"));
  EXPECT_FALSE(SmallestAverageForKl(curves, -1.0, bounds).ok());
  EXPECT_FALSE(SmallestAverageForKl(curves, NAN, bounds).ok());
}

// A response profile of snapkv on the grid 32, 64, 128, 256 and the full context 512, one sample:
// `kl[l]` is layer l's KL at the first four budgets (the full cache's is 0).
SensitivityProfile ResponseProfile(const std::vector<std::vector<double>>& kl) {
  SensitivityProfile p;
  p.model = {.hash = "ab12",
             .architecture = "llama",
             .name = "t",
             .n_layers = static_cast<int64_t>(kl.size()),
             .n_kv_heads = 1,
             .head_dim = 4,
             .d_model = 8,
             .vocab_size = 16};
  p.params.objective = Objective::kResponse;
  p.params.selector = ResponseSelector::kSnapKv;
  p.params.samples = 1;
  p.params.context_len = 512;
  p.params.probe_len = 32;
  p.params.budgets = {32, 64, 128, 256, 512};
  p.params.trials = 5;
  for (size_t l = 0; l < kl.size(); ++l) {
    p.params.layers.push_back(static_cast<int64_t>(l));
    LayerSensitivity layer{.layer = static_cast<int64_t>(l), .count = 5};
    for (size_t t = 0; t < p.params.budgets.size(); ++t) {
      const double value = t < kl[l].size() ? kl[l][t] : 0.0;
      layer.response.push_back({.budget = p.params.budgets[t], .mean_kl = value});
      layer.mean_kl += value / 5;
    }
    layer.per_sample_mean = {layer.mean_kl};
    p.layers.push_back(std::move(layer));
  }
  p.created_at = "2025-01-31T12:00:00Z";
  p.tool_version = "test";
  return p;
}

TEST(ResponseCurvesTest, EveryLayersPointsInGridOrder) {
  const SensitivityProfile profile = ResponseProfile({{0.8, 0.4, 0.2, 0.1}, {0.3, 0.2, 0.1, 0.05}});
  auto curves = ResponseCurves(profile);
  ASSERT_TRUE(curves.ok()) << curves.status();
  ASSERT_EQ(curves->size(), 2u);
  EXPECT_THAT((*curves)[0].budgets, ElementsAre(32, 64, 128, 256, 512));
  EXPECT_THAT((*curves)[0].kl, ElementsAre(0.8, 0.4, 0.2, 0.1, 0.0));
  EXPECT_THAT((*curves)[1].kl, ElementsAre(0.3, 0.2, 0.1, 0.05, 0.0));
}

TEST(ResponseCurvesTest, ANoiseProfileIsAFailedPrecondition) {
  SensitivityProfile noise = ResponseProfile({{0.8, 0.4, 0.2, 0.1}});
  noise.params.objective = Objective::kNoise;
  auto curves = ResponseCurves(noise);
  EXPECT_EQ(curves.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(curves.status().message()),
              HasSubstr("profile measured objective noise; response allocation needs a response "
                        "profile"));
}

TEST(ResponseCurvesTest, AMissingLayerIsNamed) {
  SensitivityProfile profile =
      ResponseProfile({{0.8, 0.4, 0.2, 0.1}, {0.3, 0.2, 0.1, 0.05}, {0.5, 0.4, 0.3, 0.2}});
  profile.params.layers = {0, 2};
  profile.layers.erase(profile.layers.begin() + 1);
  auto curves = ResponseCurves(profile);
  EXPECT_EQ(curves.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(curves.status().message()), HasSubstr("no response for layer 1 of 3"));
}

TEST(ResponseCurvesTest, AllocatesLikeTheCurvesThemselves) {
  // Layer 0 loses ten times what layer 1 loses at every budget.
  const SensitivityProfile profile =
      ResponseProfile({{2.0, 1.0, 0.5, 0.25}, {0.2, 0.1, 0.05, 0.025}});
  auto curves = ResponseCurves(profile);
  ASSERT_TRUE(curves.ok()) << curves.status();
  auto out = AllocateByResponse(*curves, 2 * 128, {.min_tokens = 32});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<ResponseCurve> by_hand = {
      {.budgets = {32, 64, 128, 256, 512}, .kl = {2.0, 1.0, 0.5, 0.25, 0.0}},
      {.budgets = {32, 64, 128, 256, 512}, .kl = {0.2, 0.1, 0.05, 0.025, 0.0}}};
  auto expected = AllocateByResponse(by_hand, 2 * 128, {.min_tokens = 32});
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(out->tokens, expected->tokens);
  EXPECT_GT(out->tokens[0], out->tokens[1]);
  EXPECT_EQ(out->tokens[0] + out->tokens[1], 256);
}

// --- Per-head response profiles ------------------------------------------------------------------

// ResponseProfile as a per-head calibration: `kl[l][h]` is KV head h of layer l's KL at the first
// four budgets; each layer's response is the sum of its heads'.
SensitivityProfile PerHeadProfile(const std::vector<std::vector<std::vector<double>>>& kl) {
  std::vector<std::vector<double>> sums;
  for (const auto& heads : kl) {
    std::vector<double> sum(4, 0.0);
    for (const auto& head : heads) {
      for (size_t t = 0; t < 4; ++t) sum[t] += head[t];
    }
    sums.push_back(sum);
  }
  SensitivityProfile p = ResponseProfile(sums);
  const int64_t heads = static_cast<int64_t>(kl.front().size());
  p.model.n_kv_heads = heads;
  p.params.kv_heads = heads;
  p.params.trials = 5 * heads;
  for (size_t l = 0; l < kl.size(); ++l) {
    LayerSensitivity& layer = p.layers[l];
    layer.count = 5 * heads;
    layer.mean_kl = 0.0;
    for (const auto& head : kl[l]) {
      std::vector<ResponsePoint>& points = layer.head_response.emplace_back();
      for (size_t t = 0; t < p.params.budgets.size(); ++t) {
        const double value = t < head.size() ? head[t] : 0.0;
        points.push_back({.budget = p.params.budgets[t], .mean_kl = value});
        layer.mean_kl += value / static_cast<double>(5 * heads);
      }
    }
    layer.per_sample_mean = {layer.mean_kl};
  }
  return p;
}

// Two layers of two heads: in layer 0 head 0 loses ten times what head 1 does; layer 1's heads
// are alike and lose little.
SensitivityProfile TwoByTwoPerHeadProfile() {
  return PerHeadProfile({{{2.0, 1.0, 0.5, 0.25}, {0.2, 0.1, 0.05, 0.025}},
                         {{0.3, 0.2, 0.1, 0.05}, {0.3, 0.2, 0.1, 0.05}}});
}

BudgetOptions PerHeadOptions(int64_t average) {
  BudgetOptions options{.average_tokens = average};
  options.per_head = true;
  return options;
}

TEST(HeadResponseCurvesTest, EveryHeadsPointsInGridOrder) {
  auto curves = HeadResponseCurves(TwoByTwoPerHeadProfile());
  ASSERT_TRUE(curves.ok()) << curves.status();
  ASSERT_EQ(curves->size(), 2u);
  ASSERT_EQ((*curves)[0].size(), 2u);
  EXPECT_THAT((*curves)[0][1].budgets, ElementsAre(32, 64, 128, 256, 512));
  EXPECT_THAT((*curves)[0][1].kl, ElementsAre(0.2, 0.1, 0.05, 0.025, 0.0));
  EXPECT_THAT((*curves)[1][0].kl, ElementsAre(0.3, 0.2, 0.1, 0.05, 0.0));
  // A per-layer response profile has no head curves.
  auto none = HeadResponseCurves(ResponseProfile({{0.8, 0.4, 0.2, 0.1}}));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("need a per-head response profile (`ripplekv calibrate --objective "
                        "response --per-head`)"));
}

TEST(PerHeadBudgetMapTest, IsTheAllocationOfTheHeadCurvesAtTheSameMemory) {
  const SensitivityProfile profile = TwoByTwoPerHeadProfile();
  auto heads = HeadResponseCurves(profile);
  ASSERT_TRUE(heads.ok()) << heads.status();
  const std::vector<ResponseCurve> flat = {(*heads)[0][0], (*heads)[0][1], (*heads)[1][0],
                                           (*heads)[1][1]};
  for (int64_t average : {32, 33, 64, 100, 128, 300}) {
    SCOPED_TRACE(::testing::Message() << "average " << average);
    StatusOr<BudgetMap> map = ComputeBudgetMap(profile, PerHeadOptions(average));
    ASSERT_TRUE(map.ok()) << map.status();
    // 2 layers x 2 heads x B tokens: the memory of the per-layer map at B.
    auto expected = AllocateByResponse(flat, 4 * average, {.min_tokens = 32});
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_EQ(map->head_tokens.size(), 2u);
    EXPECT_THAT(map->head_tokens[0], ElementsAre(expected->tokens[0], expected->tokens[1]));
    EXPECT_THAT(map->head_tokens[1], ElementsAre(expected->tokens[2], expected->tokens[3]));
    // tokens[l]: the layer's mean over its heads, floor or ceil, summing to T.
    EXPECT_EQ(map->total_tokens, 2 * average);
    EXPECT_EQ(map->tokens[0] + map->tokens[1], 2 * average);
    for (size_t l = 0; l < 2; ++l) {
      const int64_t sum = map->head_tokens[l][0] + map->head_tokens[l][1];
      EXPECT_GE(map->tokens[l], sum / 2);
      EXPECT_LE(map->tokens[l], (sum + 1) / 2);
      for (int64_t b : map->head_tokens[l]) EXPECT_GE(b, 32);
    }
    EXPECT_TRUE(map->options.per_head);
    EXPECT_EQ(map->objective, Objective::kResponse);
    EXPECT_EQ(map->multipliers.size(), 2u);
  }
  // Within layer 0 the head that loses ten times more keeps more.
  StatusOr<BudgetMap> map = ComputeBudgetMap(profile, PerHeadOptions(100));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_GT(map->head_tokens[0][0], map->head_tokens[0][1]);
  // The per-layer map of the same profile (the summed curves) has no head budgets.
  BudgetOptions per_layer = PerHeadOptions(100);
  per_layer.per_head = false;
  StatusOr<BudgetMap> layer_map = ComputeBudgetMap(profile, per_layer);
  ASSERT_TRUE(layer_map.ok()) << layer_map.status();
  EXPECT_TRUE(layer_map->head_tokens.empty());
  EXPECT_EQ(layer_map->tokens[0] + layer_map->tokens[1], 200);
}

TEST(PerHeadBudgetMapTest, NeedsAPerHeadResponseProfile) {
  StatusOr<BudgetMap> per_layer =
      ComputeBudgetMap(ResponseProfile({{0.8, 0.4, 0.2, 0.1}}), PerHeadOptions(64));
  EXPECT_EQ(per_layer.status().code(), absl::StatusCode::kFailedPrecondition);
  SensitivityProfile noise = ResponseProfile({{0.8, 0.4, 0.2, 0.1}});
  noise.params.objective = Objective::kNoise;
  noise.params.budgets.clear();
  noise.params.trials = 1;
  for (LayerSensitivity& l : noise.layers) {
    l.response.clear();
    l.count = 1;
  }
  StatusOr<BudgetMap> from_noise = ComputeBudgetMap(noise, PerHeadOptions(64));
  EXPECT_EQ(from_noise.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(from_noise.status().message()), HasSubstr("measured objective noise"));
  BudgetOptions bare = PerHeadOptions(64);
  bare.ratio = 2.0;
  const std::vector<double> sensitivities = {0.1, 0.2};
  StatusOr<BudgetMap> from_bare = ComputeBudgetMap(sensitivities, bare);
  EXPECT_EQ(from_bare.status().code(), absl::StatusCode::kInvalidArgument);
  // Too few tokens for every head's smallest budget names the bound.
  StatusOr<BudgetMap> infeasible = ComputeBudgetMap(TwoByTwoPerHeadProfile(), PerHeadOptions(20));
  EXPECT_EQ(infeasible.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResponseAllocationTest, TheHullBoundNeverExceedsThePrediction) {
  // At every layer's full cache the prediction is 0; summing slope x tokens over many hull
  // segments would leave a rounding residue above it.
  const std::vector<ResponseCurve> curves = {
      {.budgets = {32, 64, 128, 256, 512}, .kl = {0.9, 0.5, 0.2, 0.05, 0.0}},
      {.budgets = {32, 64, 128, 256, 512}, .kl = {2.0, 1.2, 0.6, 0.2, 0.0}},
      {.budgets = {32, 64, 128, 256, 512}, .kl = {0.3, 0.1, 0.04, 0.01, 0.0}}};
  const ResponseAllocator allocator = *ResponseAllocator::Create(curves, {.min_tokens = 32});
  for (int64_t average = 32; average <= 600; average += 7) {
    auto out = allocator.Allocate(3 * average);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_LE(out->hull_kl, out->predicted_kl) << "average " << average;
    EXPECT_GE(out->hull_kl, 0.0);
  }
  auto full = allocator.Allocate(3 * 512);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->predicted_kl, 0.0);
  EXPECT_EQ(full->hull_kl, 0.0);
}

// The smallest sum of KL_l(b_l) over every integer allocation within the bounds that sums to
// `total`, by dynamic programming over layers (exhaustive: small cases only).
double BruteForceOptimum(const std::vector<ResponseCurve>& curves, int64_t total, int64_t lo,
                         int64_t hi) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(total + 1, inf);  // best[t]: the layers so far, t tokens spent
  best[0] = 0.0;
  for (const ResponseCurve& curve : curves) {
    std::vector<double> next(total + 1, inf);
    for (int64_t spent = 0; spent <= total; ++spent) {
      if (best[spent] == inf) continue;
      for (int64_t b = lo; b <= hi && spent + b <= total; ++b) {
        next[spent + b] = std::min(
            next[spent + b], best[spent] + InterpolateResponse(curve, static_cast<double>(b)));
      }
    }
    best = std::move(next);
  }
  return best[total];
}

// A random curve on the grid 2, 4, 8, 16, 32. Convex: its KL falls by less per doubling at each
// step (so it is convex in the budget between and across grid points). Otherwise any values.
ResponseCurve RandomCurve(std::mt19937& rng, bool convex) {
  ResponseCurve curve{.budgets = {2, 4, 8, 16, 32}, .kl = {}};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (convex) {
    std::vector<double> drops(4);
    for (double& d : drops) d = unit(rng);
    std::sort(drops.rbegin(), drops.rend());
    double kl = 0.0;
    curve.kl.assign(5, 0.0);
    for (int i = 3; i >= 0; --i) curve.kl[i] = kl += drops[i];
  } else {
    for (int i = 0; i < 5; ++i) curve.kl.push_back(2.0 * unit(rng));
  }
  return curve;
}

void CheckAgainstBruteForce(bool convex, int cases) {
  std::mt19937 rng(convex ? 7 : 11);
  for (int c = 0; c < cases; ++c) {
    const int layers = 2 + static_cast<int>(rng() % 3);
    std::vector<ResponseCurve> curves;
    for (int l = 0; l < layers; ++l) curves.push_back(RandomCurve(rng, convex));
    const int64_t lo = 1 + static_cast<int64_t>(rng() % 3);
    const std::optional<int64_t> hi =
        rng() % 2 ? std::optional<int64_t>(lo + static_cast<int64_t>(rng() % 40)) : std::nullopt;
    const int64_t max_total = hi ? layers * *hi : layers * 48;
    const int64_t total = layers * lo + static_cast<int64_t>(rng() % (max_total - layers * lo + 1));
    SCOPED_TRACE(testing::Message() << "case " << c << ": " << layers << " layers, total " << total
                                    << ", lo " << lo << ", hi " << (hi ? *hi : -1));
    auto out = AllocateByResponse(curves, total, {.min_tokens = lo, .max_tokens = hi});
    ASSERT_TRUE(out.ok()) << out.status();
    int64_t sum = 0;
    for (int64_t b : out->tokens) {
      EXPECT_GE(b, lo);
      if (hi) {
        EXPECT_LE(b, *hi);
      }
      sum += b;
    }
    EXPECT_EQ(sum, total);
    const double optimum =
        BruteForceOptimum(curves, total, lo, hi ? *hi : total - (layers - 1) * lo);
    if (convex) {
      EXPECT_NEAR(out->predicted_kl, optimum, 1e-9);
      EXPECT_NEAR(out->hull_kl, optimum, 1e-9);
    } else {
      EXPECT_LE(out->hull_kl, optimum + 1e-9);
      EXPECT_GE(out->predicted_kl, optimum - 1e-9);
    }
  }
}

TEST(ResponseAllocationTest, ForEachAverageIsAllocateBitForBit) {
  std::mt19937 rng(7);
  for (int c = 0; c < 200; ++c) {
    const size_t layers = 1 + c % 4;
    std::vector<ResponseCurve> curves;
    for (size_t l = 0; l < layers; ++l) curves.push_back(RandomCurve(rng, c % 2 == 0));
    const int64_t lo = 1 + c % 3;
    std::optional<int64_t> hi;
    if (c % 3 == 0) hi = 20 + c % 17;
    const auto allocator = ResponseAllocator::Create(curves, {.min_tokens = lo, .max_tokens = hi});
    ASSERT_TRUE(allocator.ok()) << allocator.status();
    const int64_t last = hi.value_or(40);
    int64_t expected_average = lo;
    ASSERT_TRUE(allocator
                    ->ForEachAverage(lo, last,
                                     [&](int64_t average, const ResponseAllocation& got) {
                                       EXPECT_EQ(average, expected_average++);
                                       auto want = allocator->Allocate(
                                           static_cast<int64_t>(layers) * average);
                                       EXPECT_TRUE(want.ok()) << want.status();
                                       EXPECT_EQ(got.tokens, want->tokens);
                                       EXPECT_EQ(got.predicted_kl, want->predicted_kl);
                                       EXPECT_EQ(got.hull_kl, want->hull_kl);
                                       return true;
                                     })
                    .ok());
    EXPECT_EQ(expected_average, last + 1) << "every average visited";
  }
  // The pass stops when told to, and refuses totals Allocate() refuses.
  const std::vector<ResponseCurve> curves = {{.budgets = {4, 16}, .kl = {1.0, 0.0}}};
  const auto allocator = ResponseAllocator::Create(curves, {.min_tokens = 4, .max_tokens = 16});
  ASSERT_TRUE(allocator.ok());
  int visits = 0;
  ASSERT_TRUE(
      allocator
          ->ForEachAverage(4, 16, [&](int64_t, const ResponseAllocation&) { return ++visits < 3; })
          .ok());
  EXPECT_EQ(visits, 3);
  auto nothing = [](int64_t, const ResponseAllocation&) { return true; };
  EXPECT_EQ(allocator->ForEachAverage(3, 16, nothing).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(allocator->ForEachAverage(4, 17, nothing).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(allocator->ForEachAverage(8, 4, nothing).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResponseAllocationTest, OptimalOnConvexCurvesAgainstBruteForce) {
  CheckAgainstBruteForce(/*convex=*/true, 300);
}

TEST(ResponseAllocationTest, HullBoundBracketsTheOptimumOnNonConvexCurves) {
  CheckAgainstBruteForce(/*convex=*/false, 300);
}

}  // namespace
}  // namespace ripplekv::method
