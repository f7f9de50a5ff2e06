#pragma once
// The one JSON form of the calibration parameters (method/calibration_params.h): the "params"
// object of a profile document (docs/BUDGETS.md), of a stored job's spec (docs/STORE.md) and of
// the task a worker mirrors to its tensor-parallel ranks. The members:
//   "objective" ("response"), "selector" ("snapkv" | "h2o" | "streaming") and "budgets" (an
//   array), first, only with objective response;
//   "mode" ("cache" | "prefill"), "alpha", "trials", "seed", "samples", "context_len",
//   "probe_len", "layers" (an array), always;
//   "data_seed" when not 0, "until_stable" when true, "max_samples" with until_stable or when not
//   its default: a value that uses none of the optional members (a noise calibration with the
//   defaults) encodes as before they existed, and a document without them reads with the
//   defaults (objective "noise", selector "snapkv", no budgets).
// Reading checks the JSON types only; the method's rules are ValidateCalibrationParams', checked
// by whoever accepts the value (a stored job is read as it was accepted). A noise value's selector
// is not written (a noise calibration does not read it), so it reads back as the default.
//
// All functions are pure and thread-safe.

#include <initializer_list>
#include <string>
#include <string_view>

#include "base/status.h"
#include "method/calibration_params.h"
#include "nlohmann/json.hpp"

namespace ripplekv::method {

// The members above, in that order. Doubles are written as nlohmann writes them (the shortest
// form that reads back to the same bits).
nlohmann::ordered_json CalibrationParamsToJson(const CalibrationParams& params);

// Reads the members above from `object`, which may also hold `other_keys` (the enclosing shape's
// own members, which the caller reads). InvalidArgument "<what>: <path>.<member>: <problem>" for
// a value that is not an object, a missing or mistyped member (integers must be integral; seed
// and data_seed non-negative), an unknown mode, objective or selector, or an unknown key.
[[nodiscard]] StatusOr<CalibrationParams> CalibrationParamsFromJson(
    const nlohmann::json& object, std::string_view what, const std::string& path,
    std::initializer_list<std::string_view> other_keys = {});

}  // namespace ripplekv::method
