#pragma once
// The one JSONL reader: cuts a file's bytes into lines and parses each with nlohmann::json,
// with the errors every JSONL input shares ("FILE:LINE: invalid JSON at byte N: ...",
// "FILE:LINE: line longer than N bytes", "FILE:LINE: expected a JSON object, got array").
// Callers keep their own field checks and their own "no records" messages. Thread-safe (no
// state); used by calibration data, corpus files, LongBench data and `ripplekv compare`.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "nlohmann/json_fwd.hpp"

namespace ripplekv::method {

// absl::ascii_isspace's set: space, \t, \n, \v, \f, \r.
inline constexpr std::string_view kAsciiSpace = " \t\n\v\f\r";

struct JsonlOptions {
  // Longest line, in bytes as stored (before a BOM or a trailing \r is dropped); a longer line is
  // an error. 0: no limit (the file's own size cap is the bound).
  size_t max_line_bytes = 0;
  // A line made only of these bytes (after the BOM and trailing \r are dropped) is skipped.
  // Readers differ here and keep their historic sets (see each caller).
  std::string_view blank_chars = kAsciiSpace;
  // Named in the error for a line that parses to something other than an object:
  // "FILE:LINE: expected <object_description>, got <type>".
  std::string_view object_description = "a JSON object";
};

// One non-blank line, parsed.
struct JsonlLine {
  int64_t number = 0;           // 1-based, counting every line (blank ones too)
  const std::string& where;     // "NAME:LINE", the prefix of every error about the line
  const nlohmann::json& value;  // always an object
};

enum class JsonlNext { kMore, kStop };

// Calls `visit` for every non-blank line of `text`, in order, until it returns kStop or an error
// (returned as is). Lines end at '\n'; a last line without one counts; one trailing '\r' is
// dropped (CRLF files), and a UTF-8 byte-order mark at the start of line 1. `name` (a path or
// a label) starts every message. Errors (InvalidArgument): a line over `max_line_bytes`, a line
// that is not valid JSON, a value that is not an object. Lines after kStop are not looked at.
[[nodiscard]] Status ForEachJsonlLine(
    std::string_view text, std::string_view name, const JsonlOptions& options,
    const std::function<StatusOr<JsonlNext>(const JsonlLine&)>& visit);

}  // namespace ripplekv::method
