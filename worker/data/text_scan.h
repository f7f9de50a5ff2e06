#pragma once
// Small text predicates shared by the readers of worker/data (internal to the folder).
// Pure functions; thread-safe.

#include <algorithm>
#include <string_view>

#include "absl/strings/ascii.h"

namespace ripplekv::worker::text_scan {

// Whether `line` is empty or only ASCII whitespace.
inline bool IsBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

// `text` without a leading UTF-8 byte-order mark.
inline std::string_view DropBom(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  return text;
}

}  // namespace ripplekv::worker::text_scan
