#pragma once
// Validation and planning of a calibration job (docs/DESIGN.md §2-3): a submitted store::JobSpec is
// checked against the method's rules and the model's layer count, then split into one task per
// (sample, layer), each covering all of the job's trials.
//
// All functions are thread-safe (no shared state).

#include <cstdint>
#include <vector>

#include "kernels/base/status.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

// Checks a submitted spec. `model_n_layers` is the model's layer count L (> 0), which the caller
// knows from the submission or from a registered worker holding the model.
// InvalidArgument naming the field ("model_hash", "params.alpha", ...) when: model_hash is
// empty; data_inline and data_path are both set; params.alpha is not finite or <= 0 (alpha 0
// measures nothing and a profile requires alpha > 0); params.trials, params.samples,
// params.context_len or params.probe_len is 0; params.probe_len >= params.context_len;
// a params.layers entry is >= model_n_layers or repeated; model_n_layers <= 0.
[[nodiscard]] Status ValidateJobSpec(const store::JobSpec& spec, int64_t model_n_layers);

// The layers a job measures: params.layers sorted ascending, or 0..model_n_layers-1 when empty.
std::vector<uint32_t> JobLayers(const store::JobSpec& spec, int64_t model_n_layers);

// One task per (sample, layer) in canonical order (sample-major, layers ascending). Call after
// ValidateJobSpec() succeeded.
std::vector<store::PlannedTask> PlanTasks(const store::JobSpec& spec, int64_t model_n_layers);

}  // namespace ripplekv::scheduler
