#include "method/json_fields.h"
#include "base/strings.h"

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ripplekv::method::json_fields {
namespace {

Status TypeError(std::string_view what, const std::string& path, std::string_view expected,
                 const Json& value) {
  return Error(what, path, absl::StrCat("expected ", Sv(expected), ", got ", value.type_name()));
}

}  // namespace

std::string Child(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return absl::StrCat(path, ".", Sv(key));
}

std::string Index(const std::string& path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

Status Error(std::string_view what, const std::string& path, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(what), ": ", path.empty() ? "(root)" : path, ": ", Sv(problem)));
}

StatusOr<Json> Parse(std::string_view text, std::string_view what) {
  // One key set per open object; `duplicate` records the first repeated key.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  Json::parser_callback_t callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json json;
  try {
    json = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), ": JSON syntax error at byte ", e.byte, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(what), ": invalid JSON: ", e.what()));
  }
  if (duplicate) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), ": key \"", *duplicate, "\" appears twice in one object"));
  }
  return json;
}

StatusOr<std::string> Dump(const OrderedJson& json, std::string_view what) {
  try {
    return json.dump(2) + "\n";
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(what), ": cannot serialize (strings must be valid UTF-8): ", e.what()));
  }
}

Status ExpectObject(const Json& value, std::string_view what, const std::string& path,
                    std::initializer_list<std::string_view> allowed) {
  if (!value.is_object()) return TypeError(what, path, "an object", value);
  for (const auto& [key, unused] : value.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) return Error(what, Child(path, key), "unknown field");
  }
  return absl::OkStatus();
}

StatusOr<const Json*> Member(const Json& object, std::string_view what, const std::string& path,
                             std::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) return Error(what, Child(path, key), "missing");
  return &*it;
}

StatusOr<std::string> AsString(const Json& value, std::string_view what, const std::string& path) {
  if (!value.is_string()) return TypeError(what, path, "a string", value);
  return value.get<std::string>();
}

StatusOr<double> AsDouble(const Json& value, std::string_view what, const std::string& path) {
  if (!value.is_number()) return TypeError(what, path, "a number", value);
  double d = value.get<double>();
  if (!std::isfinite(d)) return Error(what, path, "number is not finite");
  return d;
}

StatusOr<int64_t> AsInt(const Json& value, std::string_view what, const std::string& path) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(what, path, absl::StrCat("integer ", u, " is out of range"));
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return TypeError(what, path, "an integer", value);
}

StatusOr<uint64_t> AsUint(const Json& value, std::string_view what, const std::string& path) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    return Error(what, path, absl::StrCat("integer ", value.get<int64_t>(), " is negative"));
  }
  return TypeError(what, path, "a non-negative integer", value);
}

StatusOr<std::optional<int64_t>> AsOptionalInt(const Json& value, std::string_view what,
                                               const std::string& path) {
  if (value.is_null()) return std::optional<int64_t>();
  if (!value.is_number_integer()) return TypeError(what, path, "an integer or null", value);
  ASSIGN_OR_RETURN(int64_t v, AsInt(value, what, path));
  return std::optional<int64_t>(v);
}

Status ExpectArray(const Json& value, std::string_view what, const std::string& path) {
  if (!value.is_array()) return TypeError(what, path, "an array", value);
  return absl::OkStatus();
}

}  // namespace ripplekv::method::json_fields
