#pragma once
// Strict UTF-8 checks for what the CLI prints or sends: protobuf `string` fields and the
// scheduler's store accept only valid UTF-8. Thread-safe; no state.

#include <cstddef>
#include <string_view>

namespace ripplekv::cli {

// Length of the strictly valid UTF-8 sequence at the start of `s` (1..4), or 0 when `s` does not
// start with one (stray continuation byte, truncated sequence, overlong form, surrogate, code point
// above U+10FFFF, 0xF8..0xFF).
size_t ValidUtf8Prefix(std::string_view s);

// The byte offset of the first byte of `s` that does not start a valid sequence, or
// std::string_view::npos when all of `s` is valid UTF-8.
size_t FirstInvalidUtf8(std::string_view s);

inline bool IsValidUtf8(std::string_view s) {
  return FirstInvalidUtf8(s) == std::string_view::npos;
}

}  // namespace ripplekv::cli
