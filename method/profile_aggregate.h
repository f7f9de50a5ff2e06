#pragma once
// Aggregation of trial results into per-layer sensitivities (docs/DESIGN.md §2, "Profile"). The
// result depends only on the set of inputs, never on their order: values are sorted by (sample,
// layer, trial) and summed in that order in double, so the same job gives bit-identical profiles
// whatever the number of workers, retries or restarts.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/profile.h"

namespace ripplekv::method {

// One trial result: KL(s, l, t) in nats.
struct TrialKl {
  int64_t sample = 0;
  int64_t layer = 0;
  int64_t trial = 0;
  double kl = 0.0;
};

// The largest KL a trial may report, nats. A softmax over finite fp32 logits gives KL values of
// tens of nats at most; anything near this bound (or 1e308) is broken numerics or a forged result,
// and one such value would dominate its layer's mean in the published profile.
inline constexpr double kMaxTrialKl = 1e4;

// The rule every trial result passes wherever it is produced or received (the worker before
// sending, the scheduler where it arrives, AggregateProfile): finite, >= 0 and <= kMaxTrialKl.
// InvalidArgument naming the value and the bound otherwise.
[[nodiscard]] Status CheckTrialKl(double kl);

// Per layer, in ascending layer order: mean_kl = mean of all the layer's KL values, per_sample_mean
// = mean over trials of each sample (ascending sample order), std_error = stddev of the per-sample
// means (n - 1 denominator) / sqrt(n) (0 for one sample), count = number of values.
//
// The results must form a complete grid: every layer present has the same samples, and every
// (sample, layer) the same number of trials (so mean_kl is also the mean of the per-sample means).
// Errors (InvalidArgument, naming the offending key): no results; a KL value that fails
// CheckTrialKl (the trial computation clamps rounding noise at 0); a negative index; a repeated
// (sample, layer, trial); an incomplete grid.
[[nodiscard]] StatusOr<std::vector<LayerSensitivity>> AggregateProfile(
    std::span<const TrialKl> results);

// The profile of one calibration, assembled the same way wherever it ran (`ripplekv calibrate` or
// the scheduler): `model` and `params` as given except params.layers, which becomes the layers
// present in `results` (ascending); the per-layer sensitivities of AggregateProfile(results);
// `created_at` (ISO-8601, FormatIso8601Utc()); tool_version from the build (ToolVersion()); with
// two or more samples, the stability block of ComputeStability() with its default options
// (method/profile_stability.h). With objective response, each layer's `response` too: for trial t
// (budget params.budgets[t]) the mean over samples of its KL and the standard error of that mean
// (n - 1 denominator, / sqrt(n); 0 for one sample), summed in canonical sample order, so the
// points are bit-identical whatever the order of `results`. The result passes ValidateProfile().
// Errors: those of AggregateProfile() and ValidateProfile() (e.g. params.samples or params.trials
// that do not match the results' grid, a full-cache KL that is not 0); InvalidArgument for a
// response profile whose results have not one trial per budget.
[[nodiscard]] StatusOr<SensitivityProfile> AssembleProfile(const ProfileModel& model,
                                                           ProfileParams params,
                                                           std::span<const TrialKl> results,
                                                           std::string created_at);

}  // namespace ripplekv::method
