#pragma once
// Internal to method/: strict reading of JSON documents. Every error names the JSON path
// of the offending value ("layers[3].mean_kl") after a prefix naming the document ("profile: ").
// Readers reject missing fields, mistyped values, non-finite numbers, integers out of range and
// unknown keys, so a typo in a hand-edited file is an error rather than a silent default.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "nlohmann/json.hpp"

namespace ripplekv::method::json_fields {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// "a.b" / "b" when `path` is empty.
std::string Child(const std::string& path, std::string_view key);
// "a[3]".
std::string Index(const std::string& path, size_t index);

// Parses `text`; `what` prefixes every message. Syntax errors (InvalidArgument) give the byte
// offset; a key repeated in one object is an error (nlohmann would silently keep the last).
[[nodiscard]] StatusOr<Json> Parse(std::string_view text, std::string_view what);

// Serializes with two-space indentation and a trailing newline. Doubles are written in the
// shortest form that reads back to the same bits. Strings that are not valid UTF-8 are an
// InvalidArgument error (naming `what`) rather than an exception.
[[nodiscard]] StatusOr<std::string> Dump(const OrderedJson& json, std::string_view what);

// Checks that `value` (at `path`) is an object whose keys are all in `allowed`.
[[nodiscard]] Status ExpectObject(const Json& value, std::string_view what, const std::string& path,
                                  std::initializer_list<std::string_view> allowed);

// The member `key` of the object `object` (at `path`); InvalidArgument "<path>.<key>: missing" if
// absent.
[[nodiscard]] StatusOr<const Json*> Member(const Json& object, std::string_view what,
                                           const std::string& path, std::string_view key);

// Conversions of one value at `path`; InvalidArgument naming the path and the type found.
[[nodiscard]] StatusOr<std::string> AsString(const Json& value, std::string_view what,
                                             const std::string& path);
// A finite number (integers are accepted and converted).
[[nodiscard]] StatusOr<double> AsDouble(const Json& value, std::string_view what,
                                        const std::string& path);
// An integer in int64 range (a number with a fraction or exponent is rejected).
[[nodiscard]] StatusOr<int64_t> AsInt(const Json& value, std::string_view what,
                                      const std::string& path);
// A non-negative integer in uint64 range.
[[nodiscard]] StatusOr<uint64_t> AsUint(const Json& value, std::string_view what,
                                        const std::string& path);
// null or an integer in int64 range.
[[nodiscard]] StatusOr<std::optional<int64_t>> AsOptionalInt(const Json& value,
                                                             std::string_view what,
                                                             const std::string& path);
// Checks that `value` is an array.
[[nodiscard]] Status ExpectArray(const Json& value, std::string_view what, const std::string& path);

// An InvalidArgument "<what>: <path>: <problem>".
Status Error(std::string_view what, const std::string& path, std::string_view problem);

}  // namespace ripplekv::method::json_fields
