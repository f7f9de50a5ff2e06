#include "proto/calibration_params.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace ripplekv::v1 {

PerturbMode PerturbModeToProto(method::PerturbMode mode) {
  return mode == method::PerturbMode::kPrefill ? PERTURB_MODE_PREFILL : PERTURB_MODE_CACHE;
}

Objective ObjectiveToProto(method::Objective objective) {
  return objective == method::Objective::kResponse ? OBJECTIVE_RESPONSE : OBJECTIVE_NOISE;
}

ResponseSelector ResponseSelectorToProto(method::ResponseSelector selector) {
  switch (selector) {
    case method::ResponseSelector::kH2o:
      return RESPONSE_SELECTOR_H2O;
    case method::ResponseSelector::kStreaming:
      return RESPONSE_SELECTOR_STREAMING;
    case method::ResponseSelector::kSnapKv:
      break;
  }
  return RESPONSE_SELECTOR_SNAPKV;
}

void CalibrationParamsToProto(const method::CalibrationParams& params, CalibrationParams* out) {
  out->set_objective(ObjectiveToProto(params.objective));
  if (params.objective == method::Objective::kResponse) {
    out->set_selector(ResponseSelectorToProto(params.selector));
  }
  for (int64_t budget : params.budgets) out->add_budgets(static_cast<int32_t>(budget));
  out->set_kv_heads(static_cast<int32_t>(params.kv_heads));
  out->set_mode(PerturbModeToProto(params.mode));
  out->set_alpha(static_cast<float>(params.alpha));
  out->set_trials(static_cast<int32_t>(params.trials));
  out->set_seed(params.seed);
  out->set_samples(static_cast<int32_t>(params.samples));
  out->set_context_len(static_cast<int32_t>(params.context_len));
  out->set_probe_len(static_cast<int32_t>(params.probe_len));
  for (int64_t layer : params.layers) out->add_layers(static_cast<int32_t>(layer));
  out->set_data_seed(params.data_seed);
  out->set_until_stable(params.until_stable);
  if (params.until_stable) out->set_max_samples(static_cast<int32_t>(params.max_samples));
}

StatusOr<method::CalibrationParams> CalibrationParamsFromProto(const CalibrationParams& p,
                                                               std::string_view path) {
  method::CalibrationParams out;
  switch (p.objective()) {
    case OBJECTIVE_UNSPECIFIED:
    case OBJECTIVE_NOISE:
      out.objective = method::Objective::kNoise;
      break;
    case OBJECTIVE_RESPONSE:
      out.objective = method::Objective::kResponse;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(path), ".objective: unknown value ", static_cast<int>(p.objective())));
  }
  switch (p.selector()) {
    case RESPONSE_SELECTOR_UNSPECIFIED:
    case RESPONSE_SELECTOR_SNAPKV:
      out.selector = method::ResponseSelector::kSnapKv;
      break;
    case RESPONSE_SELECTOR_H2O:
      out.selector = method::ResponseSelector::kH2o;
      break;
    case RESPONSE_SELECTOR_STREAMING:
      out.selector = method::ResponseSelector::kStreaming;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(std::string(path), ".selector: unknown value ",
                                                     static_cast<int>(p.selector())));
  }
  // A noise calibration reads no selector (and its JSON form carries none), so one set is refused
  // rather than kept unread.
  if (p.selector() != RESPONSE_SELECTOR_UNSPECIFIED &&
      out.objective != method::Objective::kResponse) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(path), ".selector: only with ",
                                                   std::string(path),
                                                   ".objective OBJECTIVE_RESPONSE"));
  }
  out.budgets.assign(p.budgets().begin(), p.budgets().end());
  out.kv_heads = p.kv_heads();
  switch (p.mode()) {
    case PERTURB_MODE_UNSPECIFIED:
    case PERTURB_MODE_CACHE:
      out.mode = method::PerturbMode::kCache;
      break;
    case PERTURB_MODE_PREFILL:
      out.mode = method::PerturbMode::kPrefill;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(path), ".mode: unknown value ", static_cast<int>(p.mode())));
  }
  if (p.has_alpha()) out.alpha = static_cast<double>(p.alpha());  // exact: the engine's float
  if (p.has_trials()) out.trials = p.trials();
  out.seed = p.seed();
  if (p.has_samples()) out.samples = p.samples();
  if (p.has_context_len()) out.context_len = p.context_len();
  if (p.has_probe_len()) out.probe_len = p.probe_len();
  out.layers.assign(p.layers().begin(), p.layers().end());
  out.data_seed = p.data_seed();
  out.until_stable = p.until_stable();
  if (p.has_max_samples()) {
    if (!p.until_stable()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(path), ".max_samples: only with ",
                                                     std::string(path), ".until_stable"));
    }
    out.max_samples = p.max_samples();
  }
  return out;
}

}  // namespace ripplekv::v1
