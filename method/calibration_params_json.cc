#include "method/calibration_params_json.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "method/json_fields.h"

namespace ripplekv::method {
namespace {

using json_fields::Child;
using json_fields::Json;

// Every member the codec reads or writes.
constexpr std::array<std::string_view, 11> kKeys = {
    "mode",      "alpha",  "trials",    "seed",         "samples",    "context_len",
    "probe_len", "layers", "data_seed", "until_stable", "max_samples"};

// Reads member `key` of `object` (at `path`) into `*out` with `as`; absent optional members keep
// `*out` (the default).
template <typename T, typename As>
Status Read(const Json& object, std::string_view what, const std::string& path,
            std::string_view key, bool optional, As as, T* out) {
  if (optional && !object.contains(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Json* value, json_fields::Member(object, what, path, key));
  ASSIGN_OR_RETURN(*out, as(*value, what, Child(path, key)));
  return absl::OkStatus();
}

StatusOr<bool> AsBool(const Json& value, std::string_view what, const std::string& path) {
  if (!value.is_boolean()) {
    return json_fields::Error(what, path,
                              absl::StrCat("expected a boolean, got ", value.type_name()));
  }
  return value.get<bool>();
}

}  // namespace

nlohmann::ordered_json CalibrationParamsToJson(const CalibrationParams& p) {
  nlohmann::ordered_json j = {{"mode", std::string(PerturbModeName(p.mode))},
                              {"alpha", p.alpha},
                              {"trials", p.trials},
                              {"seed", p.seed},
                              {"samples", p.samples},
                              {"context_len", p.context_len},
                              {"probe_len", p.probe_len},
                              {"layers", p.layers}};
  if (p.data_seed != 0) j["data_seed"] = p.data_seed;
  if (p.until_stable) j["until_stable"] = true;
  if (p.until_stable || p.max_samples != CalibrationParams().max_samples) {
    j["max_samples"] = p.max_samples;
  }
  return j;
}

StatusOr<CalibrationParams> CalibrationParamsFromJson(
    const nlohmann::json& object, std::string_view what, const std::string& path,
    std::initializer_list<std::string_view> other_keys) {
  if (!object.is_object()) {
    return json_fields::Error(what, path,
                              absl::StrCat("expected an object, got ", object.type_name()));
  }
  for (const auto& [key, unused] : object.items()) {
    bool known = false;
    for (std::string_view k : kKeys) known = known || k == key;
    for (std::string_view k : other_keys) known = known || k == key;
    if (!known) return json_fields::Error(what, Child(path, key), "unknown field");
  }
  CalibrationParams p;
  std::string mode;
  RETURN_IF_ERROR(Read(object, what, path, "mode", false, json_fields::AsString, &mode));
  StatusOr<PerturbMode> parsed_mode = ParsePerturbMode(mode);
  if (!parsed_mode.ok()) {
    return json_fields::Error(what, Child(path, "mode"),
                              absl::StrCat("unknown mode \"", mode, "\" (cache|prefill)"));
  }
  p.mode = *parsed_mode;
  RETURN_IF_ERROR(Read(object, what, path, "alpha", false, json_fields::AsDouble, &p.alpha));
  RETURN_IF_ERROR(Read(object, what, path, "trials", false, json_fields::AsInt, &p.trials));
  RETURN_IF_ERROR(Read(object, what, path, "seed", false, json_fields::AsUint, &p.seed));
  RETURN_IF_ERROR(Read(object, what, path, "samples", false, json_fields::AsInt, &p.samples));
  RETURN_IF_ERROR(
      Read(object, what, path, "context_len", false, json_fields::AsInt, &p.context_len));
  RETURN_IF_ERROR(Read(object, what, path, "probe_len", false, json_fields::AsInt, &p.probe_len));
  ASSIGN_OR_RETURN(const Json* layers, json_fields::Member(object, what, path, "layers"));
  const std::string layers_path = Child(path, "layers");
  RETURN_IF_ERROR(json_fields::ExpectArray(*layers, what, layers_path));
  p.layers.reserve(layers->size());
  for (size_t i = 0; i < layers->size(); ++i) {
    ASSIGN_OR_RETURN(int64_t layer,
                     json_fields::AsInt((*layers)[i], what, json_fields::Index(layers_path, i)));
    p.layers.push_back(layer);
  }
  RETURN_IF_ERROR(Read(object, what, path, "data_seed", true, json_fields::AsUint, &p.data_seed));
  RETURN_IF_ERROR(Read(object, what, path, "until_stable", true, AsBool, &p.until_stable));
  RETURN_IF_ERROR(
      Read(object, what, path, "max_samples", true, json_fields::AsInt, &p.max_samples));
  return p;
}

}  // namespace ripplekv::method
