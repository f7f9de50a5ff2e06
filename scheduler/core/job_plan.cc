#include "scheduler/core/job_plan.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "method/calibration_params.h"
#include "method/calibration_sets.h"

namespace ripplekv::scheduler {
namespace {

Status Bad(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("job spec field ", Sv(field), ": ", Sv(why)));
}

}  // namespace

Status ValidateJobSpec(const store::JobSpec& spec, int64_t model_n_layers) {
  if (spec.model_hash.empty()) return Bad("model_hash", "is required");
  if (!spec.data_inline.empty() && !spec.data_path.empty()) {
    return Bad("data_path", "give calibration data inline or by path, not both");
  }
  const bool builtin = spec.data_inline.empty() && spec.data_path.empty();
  if (!builtin && !spec.data_builtin.empty()) {
    return Bad("data_builtin", "names a built-in corpus, but data is given inline or by path");
  }
  if (builtin && !spec.data_builtin.empty() && !method::BuiltinSetDomain(spec.data_builtin)) {
    return Bad("data_builtin", absl::StrCat("\"", spec.data_builtin, "\" is not a built-in set (",
                                            method::BuiltinCalibrationSetList(), ")"));
  }
  if (builtin && spec.data_format != store::DataFormat::kAuto) {
    return Bad("data_format", "a built-in corpus is plain text; leave the format unset");
  }
  if (!spec.data_inline.empty() && spec.data_format == store::DataFormat::kAuto) {
    return Bad("data_format", "inline data needs kJsonl or kText");
  }
  // The method's rules, stated once (method/calibration_params.h).
  if (Status s = method::ValidateCalibrationParams(spec.params, model_n_layers); !s.ok()) {
    return Status(s.code(), absl::StrCat("job spec field ", s.message()));
  }
  if (model_n_layers <= 0) {
    return Bad("model_n_layers", absl::StrCat("must be > 0, got ", model_n_layers));
  }
  return absl::OkStatus();
}

std::vector<uint32_t> JobLayers(const store::JobSpec& spec, int64_t model_n_layers) {
  std::vector<uint32_t> layers(spec.params.layers.begin(), spec.params.layers.end());
  if (layers.empty()) {
    for (int64_t l = 0; l < model_n_layers; ++l) layers.push_back(static_cast<uint32_t>(l));
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

uint32_t MaxJobSamples(const method::CalibrationParams& params) {
  return static_cast<uint32_t>(params.until_stable ? std::max(params.samples, params.max_samples)
                                                   : params.samples);
}

uint32_t NextRoundSamples(const method::CalibrationParams& params, uint32_t planned) {
  // In int64, so planned + samples cannot wrap; the result is at most max(planned, max_samples).
  return static_cast<uint32_t>(
      method::NextRoundSamples(params.samples, params.max_samples, planned));
}

std::vector<store::PlannedTask> PlanTasks(const store::JobSpec& spec, int64_t model_n_layers) {
  return PlanRound(spec, model_n_layers, 0, static_cast<uint32_t>(spec.params.samples));
}

std::vector<store::PlannedTask> PlanRound(const store::JobSpec& spec, int64_t model_n_layers,
                                          uint32_t first_sample, uint32_t end_sample) {
  const std::vector<uint32_t> layers = JobLayers(spec, model_n_layers);
  std::vector<store::PlannedTask> tasks;
  if (end_sample <= first_sample) return tasks;
  tasks.reserve(static_cast<size_t>(end_sample - first_sample) * layers.size());
  for (uint32_t s = first_sample; s < end_sample; ++s) {
    for (uint32_t l : layers) tasks.push_back({.sample = s, .layer = l});
  }
  return tasks;
}

}  // namespace ripplekv::scheduler
