// The one home of the calibration method's rules (method/calibration_params.h): each rule refuses
// its edge with a message naming the field and the value, and the defaults pass.

#include "method/calibration_params.h"

#include <cmath>
#include <limits>
#include <string>

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

}  // namespace
}  // namespace ripplekv::method
