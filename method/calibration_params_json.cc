#include "method/calibration_params_json.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "method/json_fields.h"

namespace ripplekv::method {
namespace {

using json_fields::Child;
using json_fields::Json;

// Every member the codec reads or writes.
constexpr std::array<std::string_view, 15> kKeys = {
    "objective", "selector", "budgets",   "kv_heads",     "mode",
    "alpha",     "trials",   "seed",      "samples",      "context_len",
    "probe_len", "layers",   "data_seed", "until_stable", "max_samples"};

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

// An array of integers at `path`.
StatusOr<std::vector<int64_t>> AsIntArray(const Json& value, std::string_view what,
                                          const std::string& path) {
  RETURN_IF_ERROR(json_fields::ExpectArray(value, what, path));
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t v, json_fields::AsInt(value[i], what, json_fields::Index(path, i)));
    out.push_back(v);
  }
  return out;
}

// A string member `key` of `object` read with `parse` (a Parse* of method/calibration_params.h);
// an unknown name is an error at its path listing `accepted`. Absent: `*out` is kept.
template <typename T, typename ParseFn>
Status ReadName(const Json& object, std::string_view what, const std::string& path,
                std::string_view key, bool optional, ParseFn parse, std::string_view accepted,
                T* out) {
  if (optional && !object.contains(key)) return absl::OkStatus();
  std::string name;
  RETURN_IF_ERROR(Read(object, what, path, key, false, json_fields::AsString, &name));
  StatusOr<T> parsed = parse(name);
  if (!parsed.ok()) {
    return json_fields::Error(
        what, Child(path, key),
        absl::StrCat("unknown ", Sv(key), " \"", name, "\" (", Sv(accepted), ")"));
  }
  *out = *parsed;
  return absl::OkStatus();
}

}  // namespace

nlohmann::ordered_json CalibrationParamsToJson(const CalibrationParams& p) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  // The objective first: it says how to read the rest. A noise value leaves these out, so it
  // encodes exactly as before the objective existed.
  if (p.objective != Objective::kNoise) {
    j["objective"] = std::string(ObjectiveName(p.objective));
    j["selector"] = std::string(ResponseSelectorName(p.selector));
    j["budgets"] = p.budgets;
    if (p.kv_heads != 0) j["kv_heads"] = p.kv_heads;  // a per-head response only
  }
  j["mode"] = std::string(PerturbModeName(p.mode));
  j["alpha"] = p.alpha;
  j["trials"] = p.trials;
  j["seed"] = p.seed;
  j["samples"] = p.samples;
  j["context_len"] = p.context_len;
  j["probe_len"] = p.probe_len;
  j["layers"] = p.layers;
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
  RETURN_IF_ERROR(ReadName(object, what, path, "objective", true, ParseObjective, "noise|response",
                           &p.objective));
  RETURN_IF_ERROR(ReadName(object, what, path, "selector", true, ParseResponseSelector,
                           "snapkv|h2o|streaming", &p.selector));
  RETURN_IF_ERROR(Read(object, what, path, "budgets", true, AsIntArray, &p.budgets));
  RETURN_IF_ERROR(Read(object, what, path, "kv_heads", true, json_fields::AsInt, &p.kv_heads));
  RETURN_IF_ERROR(
      ReadName(object, what, path, "mode", false, ParsePerturbMode, "cache|prefill", &p.mode));
  RETURN_IF_ERROR(Read(object, what, path, "alpha", false, json_fields::AsDouble, &p.alpha));
  RETURN_IF_ERROR(Read(object, what, path, "trials", false, json_fields::AsInt, &p.trials));
  RETURN_IF_ERROR(Read(object, what, path, "seed", false, json_fields::AsUint, &p.seed));
  RETURN_IF_ERROR(Read(object, what, path, "samples", false, json_fields::AsInt, &p.samples));
  RETURN_IF_ERROR(
      Read(object, what, path, "context_len", false, json_fields::AsInt, &p.context_len));
  RETURN_IF_ERROR(Read(object, what, path, "probe_len", false, json_fields::AsInt, &p.probe_len));
  RETURN_IF_ERROR(Read(object, what, path, "layers", false, AsIntArray, &p.layers));
  RETURN_IF_ERROR(Read(object, what, path, "data_seed", true, json_fields::AsUint, &p.data_seed));
  RETURN_IF_ERROR(Read(object, what, path, "until_stable", true, AsBool, &p.until_stable));
  RETURN_IF_ERROR(
      Read(object, what, path, "max_samples", true, json_fields::AsInt, &p.max_samples));
  return p;
}

}  // namespace ripplekv::method
