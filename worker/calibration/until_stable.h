#pragma once
// Calibration that adds samples until the profile is stable (docs/CALIBRATION.md, "Stability"):
// `ripplekv calibrate --until-stable`. Round 1 calibrates the first `initial_samples` samples;
// while the assembled profile's bootstrap (method/profile_stability.h) says not stable and the cap
// is not reached, the next round calibrates only the next `initial_samples` samples (at most up to
// `max_samples`) and the profile is assembled again from every result so far.
//
// Samples are keyed by their index (CalibrationOptions::first_sample), and `samples(n)` must return
// the first n samples of one nested order (the same first k for every n >= k: JSONL lines in file
// order, plain-text windows in the spread order of worker/data/calibration_data.h). So the final
// profile is bit for bit the profile of a plain calibration of the final number of samples.
//
// Thread-safety: as RunCalibration (one model, one caller).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/profile.h"
#include "method/profile_stability.h"
#include "worker/calibration/calibration_run.h"

namespace ripplekv::worker {

struct UntilStableOptions {
  method::StabilityOptions stability;  // the criterion: ratio, level, tolerance, seed, resamples
};

// The first n samples of the calibration set, in its nested order. Errors are passed through
// (e.g. InvalidArgument when the data has fewer than n samples).
using SampleSource = std::function<StatusOr<std::vector<CalibrationInput>>(int n)>;

// Everything but the results that goes into the profile (method::AssembleProfile).
struct ProfileContext {
  method::ProfileModel model;
  // The method's parameters (method/calibration_params.h), until_stable implied: rounds of
  // params.samples samples (the first round, and the step of every later one) up to
  // params.max_samples. The profile records method::MeasuredParams of the samples reached, with
  // an empty data source (the caller's to describe).
  method::CalibrationParams params;
  std::string created_at;
};

struct UntilStableResult {
  method::SensitivityProfile profile;  // of every sample calibrated, with its stability block
  std::vector<int> rounds;             // samples after each round, e.g. {8, 16, 24}
  bool capped = false;                 // stopped at max_samples without being stable
};

// Errors: InvalidArgument for parameters method::ValidateCalibrationParams refuses (the rounds'
// rules among them: rounds of at least 2 samples, a cap of at least one round); those of `samples`,
// RunCalibration and AssembleProfile. A sample source that runs out of samples before the profile
// is stable stops the loop with that source's error, naming how many samples were reached.
[[nodiscard]] StatusOr<UntilStableResult> CalibrateUntilStable(
    const Transformer& model, const SampleSource& samples, const CalibrationOptions& options,
    const ProfileContext& context, const UntilStableOptions& until,
    const CalibrationProgress& progress = nullptr);

}  // namespace ripplekv::worker
