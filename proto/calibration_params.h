#pragma once
// The calibration parameters of method/calibration_params.h as the API's CalibrationParams
// message, both ways: one conversion for every edge that states them (the scheduler's request and
// job adapters, a worker's task, a profile's parameters, the CLI's submit). The method's rules are
// not checked here: each edge calls method::ValidateCalibrationParams, and the scheduler adds its
// API limits and sorts a request's layers (scheduler/service/convert.h).
//
// Thread-safe (pure functions).

#include <string_view>

#include "base/status.h"
#include "method/calibration_params.h"
#include "ripplekv/v1/calibration.pb.h"

namespace ripplekv::v1 {

// A perturbation mode as the message's enum (kPrefill -> PERTURB_MODE_PREFILL, else CACHE).
PerturbMode PerturbModeToProto(method::PerturbMode mode);
// An objective and a response selector as the message's enums.
Objective ObjectiveToProto(method::Objective objective);
ResponseSelector ResponseSelectorToProto(method::ResponseSelector selector);

// Every field set to the value (alpha as the float the engine computes with; max_samples only
// with until_stable and selector only with objective response, as the message documents; budgets
// as given), into `out`.
void CalibrationParamsToProto(const method::CalibrationParams& params, CalibrationParams* out);

// The message as parameters: an unset optional field takes CalibrationParams{}'s value (the
// `ripplekv calibrate` default), OBJECTIVE_UNSPECIFIED is noise, RESPONSE_SELECTOR_UNSPECIFIED
// snapkv, PERTURB_MODE_UNSPECIFIED cache, layers and budgets in the given order (the grid is not
// resolved here: method::ResolveResponseGrid). InvalidArgument "<path>.<field>: ..." for an
// unknown objective, selector or mode, a selector set without objective response, or max_samples
// set without until_stable.
[[nodiscard]] StatusOr<method::CalibrationParams> CalibrationParamsFromProto(
    const CalibrationParams& params, std::string_view path);

}  // namespace ripplekv::v1
