#pragma once
// A whole local calibration: every sample x layer x trial of docs/DESIGN.md §2, run in a canonical
// order with one prefill per sample. The result is the raw KL of every trial; the profile is
// method::AssembleProfile() (method/profile_aggregate.h), shared with the distributed service so
// both give bit-identical profiles.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/profile_aggregate.h"
#include "worker/calibration/sample_calibrator.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

struct CalibrationInput {
  std::vector<int32_t> context;  // C tokens whose cache is perturbed
  std::vector<int32_t> probe;    // W teacher-forced probe tokens
};

struct CalibrationOptions {
  TrialOptions trials;  // alpha, trials per (sample, layer), seed
  PerturbMode mode = PerturbMode::kCache;
  std::vector<int> layers;  // layers to measure; empty = all
  bool naive = false;       // reference path: a full forward per trial
  // Index of samples[0]: sample i is calibration sample first_sample + i, which keys its noise and
  // its results. A set extended later (`calibrate --until-stable`) runs only the new samples and
  // gets the results a run over the whole set would give. >= 0.
  int first_sample = 0;
};

// One measured trial: KL = mean over probe positions of KL(clean || perturbed), nats. The
// method's type, so results go to method::AssembleProfile() as they are.
using method::TrialKl;

// The model as profiles describe it: `hash` (docs/MODEL_HASH.md) and the shape of `config`. Local
// calibration and workers both use it, so profiles from either agree.
method::ProfileModel ProfileModelOf(const ModelConfig& config, std::string hash);

// Called after each (sample, layer) with (done, total) units of work.
using CalibrationProgress = std::function<void(int64_t, int64_t)>;

// Runs samples in order, layers in the given order (sorted, deduplicated), trials batched.
// Errors: InvalidArgument (no samples, bad layer, alpha < 0, trials < 1, first_sample < 0), and
// the engine's.
StatusOr<std::vector<TrialKl>> RunCalibration(const Transformer& model,
                                              std::span<const CalibrationInput> samples,
                                              const CalibrationOptions& options,
                                              const CalibrationProgress& progress = nullptr);

}  // namespace ripplekv::worker
