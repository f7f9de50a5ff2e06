#include "scheduler/core/job_plan.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "kernels/base/strings.h"
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
  const store::MethodParams& p = spec.params;
  if (!std::isfinite(p.alpha) || p.alpha <= 0) {
    return Bad("params.alpha", absl::StrCat("must be finite and > 0, got ", p.alpha));
  }
  if (p.trials < 1) return Bad("params.trials", "must be >= 1, got 0");
  if (p.samples < 1) return Bad("params.samples", "must be >= 1, got 0");
  if (p.context_len < 1) return Bad("params.context_len", "must be >= 1, got 0");
  if (p.probe_len < 1) return Bad("params.probe_len", "must be >= 1, got 0");
  if (p.probe_len >= p.context_len) {
    return Bad("params.probe_len", absl::StrCat("must be < params.context_len (", p.context_len,
                                                "), got ", p.probe_len));
  }
  if (p.until_stable) {
    if (p.samples < 2) {
      return Bad("params.samples",
                 absl::StrCat("until_stable needs rounds of at least 2 samples, got ", p.samples));
    }
    if (p.max_samples < p.samples) {
      return Bad("params.max_samples",
                 absl::StrCat("must be >= params.samples (", p.samples, "), got ", p.max_samples));
    }
  }
  if (model_n_layers <= 0) {
    return Bad("model_n_layers", absl::StrCat("must be > 0, got ", model_n_layers));
  }
  std::set<uint32_t> seen;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const uint32_t layer = p.layers[i];
    if (layer >= model_n_layers) {
      return Bad(absl::StrCat("params.layers[", i, "]"),
                 absl::StrCat("layer ", layer, " is out of range: the model has ", model_n_layers,
                              " layers"));
    }
    if (!seen.insert(layer).second) {
      return Bad(absl::StrCat("params.layers[", i, "]"),
                 absl::StrCat("layer ", layer, " repeated"));
    }
  }
  return absl::OkStatus();
}

std::vector<uint32_t> JobLayers(const store::JobSpec& spec, int64_t model_n_layers) {
  std::vector<uint32_t> layers = spec.params.layers;
  if (layers.empty()) {
    for (int64_t l = 0; l < model_n_layers; ++l) layers.push_back(static_cast<uint32_t>(l));
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

uint32_t MaxJobSamples(const store::MethodParams& params) {
  return params.until_stable ? std::max(params.samples, params.max_samples) : params.samples;
}

uint32_t NextRoundSamples(const store::MethodParams& params, uint32_t planned) {
  const uint64_t next = static_cast<uint64_t>(planned) + params.samples;
  return static_cast<uint32_t>(
      std::max<uint64_t>(planned, std::min<uint64_t>(params.max_samples, next)));
}

std::vector<store::PlannedTask> PlanTasks(const store::JobSpec& spec, int64_t model_n_layers) {
  return PlanRound(spec, model_n_layers, 0, spec.params.samples);
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
