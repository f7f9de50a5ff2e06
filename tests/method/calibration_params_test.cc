// The one home of the calibration method's rules (method/calibration_params.h): each rule refuses
// its edge with a message naming the field and the value, and the defaults pass.

#include "method/calibration_params.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

constexpr int64_t kLayers = 4;

// The message of the refusal of `p`, or "" when it passes.
std::string Refusal(const CalibrationParams& p, int64_t n_layers = kLayers) {
  const Status s = ValidateCalibrationParams(p, n_layers);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(CalibrationParamsTest, DefaultsPass) { EXPECT_EQ(Refusal(CalibrationParams{}), ""); }

TEST(CalibrationParamsTest, AlphaZeroIsRefused) {
  EXPECT_EQ(Refusal({.alpha = 0.0}), "params.alpha: must be finite and > 0, got 0");
}

TEST(CalibrationParamsTest, NegativeAlphaIsRefused) {
  EXPECT_EQ(Refusal({.alpha = -0.5}), "params.alpha: must be finite and > 0, got -0.5");
}

TEST(CalibrationParamsTest, NanAlphaIsRefused) {
  EXPECT_EQ(Refusal({.alpha = std::nan("")}), "params.alpha: must be finite and > 0, got nan");
}

TEST(CalibrationParamsTest, InfiniteAlphaIsRefused) {
  EXPECT_EQ(Refusal({.alpha = std::numeric_limits<double>::infinity()}),
            "params.alpha: must be finite and > 0, got inf");
}

TEST(CalibrationParamsTest, ZeroTrialsAreRefused) {
  EXPECT_EQ(Refusal({.trials = 0}), "params.trials: must be >= 1, got 0");
}

TEST(CalibrationParamsTest, ZeroSamplesAreRefused) {
  EXPECT_EQ(Refusal({.samples = 0}), "params.samples: must be >= 1, got 0");
}

TEST(CalibrationParamsTest, ZeroContextOrProbeIsRefused) {
  EXPECT_EQ(Refusal({.context_len = 0}), "params.context_len: must be >= 1, got 0");
  EXPECT_EQ(Refusal({.probe_len = 0}), "params.probe_len: must be >= 1, got 0");
}

TEST(CalibrationParamsTest, ProbeNotShorterThanContextIsRefused) {
  EXPECT_EQ(Refusal({.context_len = 32, .probe_len = 32}),
            "params.probe_len: must be < params.context_len (32), got 32");
  EXPECT_EQ(Refusal({.context_len = 32, .probe_len = 40}),
            "params.probe_len: must be < params.context_len (32), got 40");
  EXPECT_EQ(Refusal({.context_len = 33, .probe_len = 32}), "");
}

TEST(CalibrationParamsTest, LayerOutOfRangeIsRefused) {
  EXPECT_EQ(Refusal({.layers = {0, 4}}),
            "params.layers[1]: layer 4 is out of range: the model has 4 layers");
  EXPECT_EQ(Refusal({.layers = {-1}}), "params.layers[0]: layer -1 is negative");
  EXPECT_EQ(Refusal({.layers = {3, 0}}), "");  // order is free; the planner sorts
}

TEST(CalibrationParamsTest, RepeatedLayerIsRefused) {
  EXPECT_EQ(Refusal({.layers = {1, 2, 1}}), "params.layers[2]: layer 1 repeated");
}

TEST(CalibrationParamsTest, UnknownLayerCountSkipsTheRangeCheck) {
  EXPECT_EQ(Refusal({.layers = {100}}, /*n_layers=*/0), "");
  EXPECT_EQ(Refusal({.layers = {100}}, /*n_layers=*/-1), "");
  // The rules that need no model still hold.
  EXPECT_EQ(Refusal({.layers = {2, 2}}, 0), "params.layers[1]: layer 2 repeated");
  EXPECT_EQ(Refusal({.layers = {-3}}, 0), "params.layers[0]: layer -3 is negative");
  EXPECT_EQ(Refusal({.alpha = 0.0}, 0), "params.alpha: must be finite and > 0, got 0");
}

TEST(CalibrationParamsTest, UntilStableNeedsRoundsOfTwoAndACapAtLeastARound) {
  EXPECT_EQ(Refusal({.samples = 1, .until_stable = true}),
            "params.samples: until_stable needs rounds of at least 2 samples, got 1");
  EXPECT_EQ(Refusal({.samples = 8, .until_stable = true, .max_samples = 7}),
            "params.max_samples: must be >= params.samples (8), got 7");
  EXPECT_EQ(Refusal({.samples = 8, .until_stable = true, .max_samples = 8}), "");
  // Without until_stable the cap is not read.
  EXPECT_EQ(Refusal({.samples = 1, .max_samples = 0}), "");
}

TEST(CalibrationParamsTest, NextRoundAddsARoundUpToTheCap) {
  EXPECT_EQ(NextRoundSamples(8, 64, 0), 8);
  EXPECT_EQ(NextRoundSamples(8, 64, 8), 16);
  EXPECT_EQ(NextRoundSamples(8, 20, 16), 20);  // the last round is cut at the cap
  EXPECT_EQ(NextRoundSamples(8, 20, 20), 20);  // capped: no more samples
  EXPECT_EQ(NextRoundSamples(8, 20, 24), 24);  // never fewer than planned
}

TEST(CalibrationParamsTest, NamesParseBackAndUnknownNamesListTheAcceptedOnes) {
  for (Objective o : {Objective::kNoise, Objective::kResponse}) {
    EXPECT_EQ(*ParseObjective(ObjectiveName(o)), o);
  }
  EXPECT_EQ(ObjectiveName(Objective::kResponse), "response");
  for (ResponseSelector s :
       {ResponseSelector::kSnapKv, ResponseSelector::kH2o, ResponseSelector::kStreaming}) {
    EXPECT_EQ(*ParseResponseSelector(ResponseSelectorName(s)), s);
  }
  EXPECT_EQ(ResponseSelectorName(ResponseSelector::kStreaming), "streaming");
  const StatusOr<Objective> objective = ParseObjective("Noise");
  EXPECT_EQ(objective.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(objective.status().message(),
            "unknown objective \"Noise\" (expected noise or response)");
  const StatusOr<ResponseSelector> selector = ParseResponseSelector("pyramidkv");
  EXPECT_EQ(selector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.status().message(),
            "unknown response selector \"pyramidkv\" (expected snapkv, h2o or streaming)");
}

TEST(CalibrationParamsTest, MinResponseBudgetIsTheSelectorsFixedPart) {
  EXPECT_EQ(MinResponseBudget(ResponseSelector::kSnapKv), kResponseWindow);
  EXPECT_EQ(MinResponseBudget(ResponseSelector::kSnapKv), 32);
  EXPECT_EQ(MinResponseBudget(ResponseSelector::kStreaming), 4);
  EXPECT_EQ(MinResponseBudget(ResponseSelector::kH2o), 1);
}

CalibrationParams Response(ResponseSelector selector = ResponseSelector::kSnapKv,
                           std::vector<int64_t> budgets = {}, int64_t context_len = 512) {
  return ResolveResponseGrid({.objective = Objective::kResponse,
                              .context_len = context_len,
                              .selector = selector,
                              .budgets = std::move(budgets)});
}

TEST(ResolveResponseGridTest, DefaultGridDropsBudgetsBelowTheSelectorAndEndsWithTheContext) {
  const CalibrationParams snapkv = Response();
  EXPECT_EQ(snapkv.budgets, (std::vector<int64_t>{32, 64, 128, 256, 512}));
  EXPECT_EQ(snapkv.trials, 5);
  EXPECT_EQ(Refusal(snapkv), "");
  const CalibrationParams h2o = Response(ResponseSelector::kH2o);
  EXPECT_EQ(h2o.budgets, (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));
  EXPECT_EQ(h2o.trials, 6);
  EXPECT_EQ(Refusal(h2o), "");
  const CalibrationParams streaming = Response(ResponseSelector::kStreaming);
  EXPECT_EQ(streaming.budgets, (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));
}

TEST(ResolveResponseGridTest, ShortContextClipsTheGrid) {
  const CalibrationParams p = Response(ResponseSelector::kH2o, {}, /*context_len=*/100);
  EXPECT_EQ(p.budgets, (std::vector<int64_t>{16, 32, 64, 100}));
  EXPECT_EQ(p.trials, 4);
  EXPECT_EQ(Refusal(p), "");
  // A context within the selector's fixed part leaves only the full cache.
  const CalibrationParams tiny = Response(ResponseSelector::kSnapKv, {}, /*context_len=*/32);
  EXPECT_EQ(tiny.budgets, (std::vector<int64_t>{32}));
  EXPECT_EQ(tiny.trials, 1);
}

TEST(ResolveResponseGridTest, ExplicitGridIsSortedDeduplicatedAndClipped) {
  const CalibrationParams p =
      Response(ResponseSelector::kSnapKv, {128, 8, 64, 128, 600, 512, 40, 31});
  EXPECT_EQ(p.budgets, (std::vector<int64_t>{40, 64, 128, 512}));
  EXPECT_EQ(p.trials, 4);
  EXPECT_EQ(Refusal(p), "");
}

TEST(ResolveResponseGridTest, IsIdempotent) {
  for (const CalibrationParams& once : {Response(), Response(ResponseSelector::kH2o, {}, 100),
                                        Response(ResponseSelector::kStreaming, {300, 4, 2, 4})}) {
    EXPECT_EQ(ResolveResponseGrid(once), once);
  }
}

TEST(ResolveResponseGridTest, NoiseIsUnchanged) {
  const CalibrationParams noise{.trials = 3, .context_len = 100};
  EXPECT_EQ(ResolveResponseGrid(noise), noise);
  // Even with budgets: the validator, not the resolution, refuses them.
  const CalibrationParams with_budgets{.budgets = {16, 512}};
  EXPECT_EQ(ResolveResponseGrid(with_budgets), with_budgets);
}

TEST(CalibrationParamsTest, NoiseCalibrationHasNoBudgets) {
  EXPECT_EQ(Refusal({.budgets = {16, 512}}),
            "params.budgets: only with objective response, got 2 budgets with objective noise");
}

TEST(CalibrationParamsTest, ResponseCalibrationIsInCacheMode) {
  CalibrationParams p = Response();
  p.mode = PerturbMode::kPrefill;
  EXPECT_EQ(Refusal(p), "params.mode: a response calibration is in cache mode, got prefill");
}

TEST(CalibrationParamsTest, ResponseGridMustBeResolved) {
  CalibrationParams p = Response();  // {32, 64, 128, 256, 512}, 5 trials
  p.budgets.clear();
  EXPECT_EQ(Refusal(p),
            "params.budgets: must end with the full cache, params.context_len (512), got none");

  p = Response();
  p.budgets = {32, 64, 64, 256, 512};
  EXPECT_EQ(Refusal(p),
            "params.budgets[2]: must be > params.budgets[1] (64): the grid is strictly ascending, "
            "got 64");
  p.budgets = {32, 128, 64, 256, 512};
  EXPECT_THAT(Refusal(p), ::testing::StartsWith("params.budgets[2]: must be > params.budgets[1]"));

  p.budgets = {16, 64, 128, 256, 512};
  EXPECT_EQ(Refusal(p),
            "params.budgets[0]: must be >= 32 (the smallest budget of selector snapkv), got 16");
  p.selector = ResponseSelector::kH2o;  // h2o takes 16
  EXPECT_EQ(Refusal(p), "");
  p.budgets = {0, 64, 128, 256, 512};
  EXPECT_EQ(Refusal(p),
            "params.budgets[0]: must be >= 1 (the smallest budget of selector h2o), got 0");

  p = Response();
  p.budgets = {32, 64, 128, 256, 400};
  EXPECT_EQ(Refusal(p),
            "params.budgets[4]: the last budget must be the full cache, params.context_len (512), "
            "got 400");
  p.budgets = {32, 64, 128, 512, 600};
  EXPECT_EQ(Refusal(p),
            "params.budgets[3]: must be < params.context_len (512) before the last, got 512");

  p = Response();
  p.trials = 2;
  EXPECT_EQ(Refusal(p),
            "params.trials: must be the number of params.budgets (5) with objective response, "
            "got 2");
}

// The response rules come after every other rule: a broken alpha is named first.
TEST(CalibrationParamsTest, ResponseRulesComeLast) {
  CalibrationParams p = Response();
  p.budgets.clear();
  p.probe_len = 600;
  EXPECT_EQ(Refusal(p), "params.probe_len: must be < params.context_len (512), got 600");
}

CalibrationParams PerHead(int64_t kv_heads, ResponseSelector selector = ResponseSelector::kH2o) {
  CalibrationParams p = Response(selector, {}, /*context_len=*/100);
  p.kv_heads = kv_heads;
  return ResolveResponseGrid(p);
}

TEST(ResolveResponseGridTest, PerHeadTrialsAreHeadsTimesTheGrid) {
  const CalibrationParams p = PerHead(3);
  EXPECT_EQ(p.budgets, (std::vector<int64_t>{16, 32, 64, 100}));
  EXPECT_EQ(p.trials, 12);
  EXPECT_EQ(ResponseTrialCount(p), 12);
  EXPECT_EQ(Refusal(p), "");
  EXPECT_EQ(ResolveResponseGrid(p), p);
}

TEST(CalibrationParamsTest, PerHeadRulesNameTheField) {
  CalibrationParams wrong_trials = PerHead(3);
  wrong_trials.trials = 4;
  EXPECT_EQ(Refusal(wrong_trials),
            "params.trials: must be params.kv_heads x the number of params.budgets (3 x 4) with "
            "a per-head response, got 4");
  CalibrationParams negative = PerHead(3);
  negative.kv_heads = -1;
  EXPECT_EQ(Refusal(negative), "params.kv_heads: must be in [0, 256] (0: per layer), got -1");
  CalibrationParams too_many = PerHead(kMaxKvHeads + 1);
  EXPECT_EQ(Refusal(too_many), "params.kv_heads: must be in [0, 256] (0: per layer), got 257");
  EXPECT_EQ(Refusal({.kv_heads = 2}),
            "params.kv_heads: a per-head response needs objective response, got 2 with objective "
            "noise");
}

}  // namespace
}  // namespace ripplekv::method
