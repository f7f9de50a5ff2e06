#pragma once
// Validation and planning of a calibration job (docs/DESIGN.md §2-3): a submitted store::JobSpec is
// checked against the method's rules and the model's layer count, then split into one task per
// (sample, layer), each covering all of the job's trials.
//
// All functions are thread-safe (no shared state).

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "method/calibration_params.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

// Checks a submitted spec. `model_n_layers` is the model's layer count L (> 0), which the caller
// knows from the submission or from a registered worker holding the model.
// InvalidArgument naming the field ("job spec field model_hash: ...") when: model_hash is
// empty; data_inline and data_path are both set (and the other data-source rules); params break
// a rule of method::ValidateCalibrationParams (the message is that function's, after "job spec
// field ": alpha not finite or <= 0, a count 0, probe_len >= context_len, a layer out of range or
// repeated, until_stable's rounds); model_n_layers <= 0.
[[nodiscard]] Status ValidateJobSpec(const store::JobSpec& spec, int64_t model_n_layers);

// The most samples a job may plan: params.max_samples for an until_stable job, else
// params.samples. What the per-job task and trial limits are checked against at submission.
uint32_t MaxJobSamples(const method::CalibrationParams& params);

// The samples planned after the round that follows `planned` samples of an until_stable job:
// min(params.max_samples, planned + params.samples), the step of
// worker::CalibrateUntilStable. Equal to `planned` when the cap is reached.
uint32_t NextRoundSamples(const method::CalibrationParams& params, uint32_t planned);

// The layers a job measures: params.layers sorted ascending, or 0..model_n_layers-1 when empty.
std::vector<uint32_t> JobLayers(const store::JobSpec& spec, int64_t model_n_layers);

// One task per (sample, layer) in canonical order (sample-major, layers ascending), for samples
// 0..params.samples-1 (an until_stable job's first round). Call after ValidateJobSpec()
// succeeded.
std::vector<store::PlannedTask> PlanTasks(const store::JobSpec& spec, int64_t model_n_layers);

// As PlanTasks for samples [first_sample, end_sample): the tasks of a later round.
std::vector<store::PlannedTask> PlanRound(const store::JobSpec& spec, int64_t model_n_layers,
                                          uint32_t first_sample, uint32_t end_sample);

}  // namespace ripplekv::scheduler
