#include "method/calibration_params.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/strings.h"

namespace ripplekv::method {
namespace {

Status Bad(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("params.", Sv(field), ": ", Sv(why)));
}

Status AtLeast(int64_t value, int64_t min, std::string_view field) {
  if (value >= min) return absl::OkStatus();
  return Bad(field, absl::StrCat("must be >= ", min, ", got ", value));
}

}  // namespace

std::string_view PerturbModeName(PerturbMode mode) {
  switch (mode) {
    case PerturbMode::kCache:
      return "cache";
    case PerturbMode::kPrefill:
      return "prefill";
  }
  return "unknown";
}

StatusOr<PerturbMode> ParsePerturbMode(std::string_view name) {
  if (name == "cache") return PerturbMode::kCache;
  if (name == "prefill") return PerturbMode::kPrefill;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown perturbation mode \"", Sv(name), "\" (expected cache or prefill)"));
}

Status ValidateCalibrationParams(const CalibrationParams& p, int64_t n_layers) {
  // Written so that NaN fails too. Alpha 0 measures nothing, and a profile requires alpha > 0.
  if (!std::isfinite(p.alpha) || !(p.alpha > 0)) {
    return Bad("alpha", absl::StrCat("must be finite and > 0, got ", p.alpha));
  }
  RETURN_IF_ERROR(AtLeast(p.trials, 1, "trials"));
  RETURN_IF_ERROR(AtLeast(p.samples, 1, "samples"));
  RETURN_IF_ERROR(AtLeast(p.context_len, 1, "context_len"));
  RETURN_IF_ERROR(AtLeast(p.probe_len, 1, "probe_len"));
  if (p.probe_len >= p.context_len) {
    return Bad("probe_len", absl::StrCat("must be < params.context_len (", p.context_len, "), got ",
                                         p.probe_len));
  }
  if (p.until_stable) {
    if (p.samples < 2) {
      return Bad("samples",
                 absl::StrCat("until_stable needs rounds of at least 2 samples, got ", p.samples));
    }
    if (p.max_samples < p.samples) {
      return Bad("max_samples",
                 absl::StrCat("must be >= params.samples (", p.samples, "), got ", p.max_samples));
    }
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const int64_t layer = p.layers[i];
    const std::string field = absl::StrCat("layers[", i, "]");
    if (layer < 0) return Bad(field, absl::StrCat("layer ", layer, " is negative"));
    if (n_layers > 0 && layer >= n_layers) {
      return Bad(field, absl::StrCat("layer ", layer, " is out of range: the model has ", n_layers,
                                     " layers"));
    }
    if (!seen.insert(layer).second) return Bad(field, absl::StrCat("layer ", layer, " repeated"));
  }
  return absl::OkStatus();
}

int64_t NextRoundSamples(int64_t samples_per_round, int64_t max_samples, int64_t planned) {
  return std::max(planned, std::min(max_samples, planned + samples_per_round));
}

}  // namespace ripplekv::method
