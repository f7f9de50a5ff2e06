#include "method/frozen_map.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "method/json_fields.h"

namespace ripplekv::method {
namespace {

using json_fields::AsInt;
using json_fields::AsString;
using json_fields::Json;
using json_fields::Member;
using json_fields::OrderedJson;

constexpr std::string_view kWhat = "frozen map";
constexpr size_t kMaxMethodChars = 64;
constexpr size_t kMaxParams = 32;
constexpr size_t kMaxParamKeyChars = 64;
constexpr size_t kMaxParamValueChars = 256;

bool IsMethodChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-';
}

StatusOr<SelectionIntent> SelectionFromJson(const Json& j) {
  RETURN_IF_ERROR(json_fields::ExpectObject(j, kWhat, "selection", {"method", "params"}));
  SelectionIntent selection;
  ASSIGN_OR_RETURN(const Json* method, Member(j, kWhat, "selection", "method"));
  ASSIGN_OR_RETURN(selection.method, AsString(*method, kWhat, "selection.method"));
  ASSIGN_OR_RETURN(const Json* params, Member(j, kWhat, "selection", "params"));
  if (!params->is_object()) {
    return json_fields::Error(kWhat, "selection.params",
                              absl::StrCat("expected an object, got ", params->type_name()));
  }
  for (const auto& [key, value] : params->items()) {
    const std::string path = absl::StrCat("selection.params[\"", key, "\"]");
    ASSIGN_OR_RETURN(selection.params[key], AsString(value, kWhat, path));
  }
  RETURN_IF_ERROR(ValidateSelectionIntent(selection));
  return selection;
}

}  // namespace

Status ValidateSelectionIntent(const SelectionIntent& selection) {
  if (selection.method.size() > kMaxMethodChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection.method: longer than ", kMaxMethodChars, " characters"));
  }
  for (char c : selection.method) {
    if (!IsMethodChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("selection.method: \"", selection.method, "\" may hold only [a-z0-9_+-]"));
    }
  }
  if (selection.params.size() > kMaxParams) {
    return absl::InvalidArgumentError(absl::StrCat("selection.params: ", selection.params.size(),
                                                   " entries, at most ", kMaxParams));
  }
  for (const auto& [key, value] : selection.params) {
    const std::string path = absl::StrCat("selection.params[\"", key, "\"]");
    if (key.empty() || key.size() > kMaxParamKeyChars) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": keys are 1..", kMaxParamKeyChars, " characters"));
    }
    if (value.size() > kMaxParamValueChars) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": values are at most ", kMaxParamValueChars, " characters"));
    }
  }
  return absl::OkStatus();
}

StatusOr<std::string> FrozenMapToJson(const FrozenMap& frozen) {
  if (frozen.profile_version == 0) {
    return absl::InvalidArgumentError("frozen map: profile_version must be >= 1");
  }
  RETURN_IF_ERROR(ValidateSelectionIntent(frozen.selection));
  ASSIGN_OR_RETURN(std::string native, BudgetMapToJson(frozen.map));
  OrderedJson params = OrderedJson::object();
  for (const auto& [key, value] : frozen.selection.params) params[key] = value;  // sorted
  const bool response = frozen.map.objective == Objective::kResponse;
  OrderedJson root = {
      {"schema_version", response ? kFrozenMapSchemaVersion : kFrozenMapNoiseSchemaVersion},
      {"model_hash", frozen.map.model_hash},
      {"profile_version", frozen.profile_version}};
  if (response) {
    root["objective"] = ObjectiveName(frozen.map.objective);
    root["selector"] = ResponseSelectorName(frozen.map.selector);
  }
  root["selection"] =
      OrderedJson{{"method", frozen.selection.method}, {"params", std::move(params)}};
  root["map"] = OrderedJson::parse(native);
  return json_fields::Dump(root, kWhat);
}

StatusOr<FrozenMap> FrozenMapFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(Json root, json_fields::Parse(json_text, kWhat));
  if (!root.is_object()) {
    return json_fields::Error(kWhat, "",
                              absl::StrCat("expected an object, got ", root.type_name()));
  }
  ASSIGN_OR_RETURN(const Json* version_json, Member(root, kWhat, "", "schema_version"));
  ASSIGN_OR_RETURN(int64_t version, AsInt(*version_json, kWhat, "schema_version"));
  if (version != kFrozenMapNoiseSchemaVersion && version != kFrozenMapSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "frozen map: schema_version ", version, " is not supported (this build reads versions ",
        kFrozenMapNoiseSchemaVersion, " and ", kFrozenMapSchemaVersion, ")"));
  }
  if (version == kFrozenMapNoiseSchemaVersion) {
    RETURN_IF_ERROR(json_fields::ExpectObject(
        root, kWhat, "", {"schema_version", "model_hash", "profile_version", "selection", "map"}));
  } else {
    RETURN_IF_ERROR(json_fields::ExpectObject(root, kWhat, "",
                                              {"schema_version", "model_hash", "profile_version",
                                               "objective", "selector", "selection", "map"}));
  }
  FrozenMap frozen;
  Objective objective = Objective::kNoise;
  ResponseSelector selector = ResponseSelector::kSnapKv;
  if (version == kFrozenMapSchemaVersion) {
    ASSIGN_OR_RETURN(const Json* objective_json, Member(root, kWhat, "", "objective"));
    ASSIGN_OR_RETURN(std::string objective_name, AsString(*objective_json, kWhat, "objective"));
    if (objective_name != ObjectiveName(Objective::kResponse)) {
      return json_fields::Error(
          kWhat, "objective",
          absl::StrCat("is \"", objective_name, "\"; a schema_version ", kFrozenMapSchemaVersion,
                       " document is a response map (a noise map is version ",
                       kFrozenMapNoiseSchemaVersion, ")"));
    }
    objective = Objective::kResponse;
    ASSIGN_OR_RETURN(const Json* selector_json, Member(root, kWhat, "", "selector"));
    ASSIGN_OR_RETURN(std::string selector_name, AsString(*selector_json, kWhat, "selector"));
    StatusOr<ResponseSelector> parsed = ParseResponseSelector(selector_name);
    if (!parsed.ok())
      return json_fields::Error(kWhat, "selector", std::string(parsed.status().message()));
    selector = *parsed;
  }
  ASSIGN_OR_RETURN(const Json* hash_json, Member(root, kWhat, "", "model_hash"));
  ASSIGN_OR_RETURN(std::string model_hash, AsString(*hash_json, kWhat, "model_hash"));
  ASSIGN_OR_RETURN(const Json* profile_json, Member(root, kWhat, "", "profile_version"));
  ASSIGN_OR_RETURN(int64_t profile_version, AsInt(*profile_json, kWhat, "profile_version"));
  if (profile_version < 1 || profile_version > UINT32_MAX) {
    return json_fields::Error(kWhat, "profile_version",
                              absl::StrCat("is ", profile_version, ", expected 1..", UINT32_MAX));
  }
  frozen.profile_version = static_cast<uint32_t>(profile_version);
  ASSIGN_OR_RETURN(const Json* selection, Member(root, kWhat, "", "selection"));
  ASSIGN_OR_RETURN(frozen.selection, SelectionFromJson(*selection));
  ASSIGN_OR_RETURN(const Json* map_json, Member(root, kWhat, "", "map"));
  StatusOr<BudgetMap> map = BudgetMapFromJson(map_json->dump());
  if (!map.ok()) {
    return Status(map.status().code(), absl::StrCat("frozen map: map.", map.status().message()));
  }
  frozen.map = *std::move(map);
  frozen.map.objective = objective;
  frozen.map.selector = selector;
  if (frozen.map.model_hash != model_hash) {
    return json_fields::Error(kWhat, "map.model_hash",
                              absl::StrCat("\"", frozen.map.model_hash,
                                           "\" differs from model_hash \"", model_hash, "\""));
  }
  return frozen;
}

StatusOr<std::string> RenderFrozenMap(const FrozenMap& frozen, BudgetFormat format) {
  return FormatBudgetMap(frozen.map, format, frozen.map.options.max_context);
}

}  // namespace ripplekv::method
