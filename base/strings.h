#pragma once
// String helpers for error messages. Debian's Abseil (20220623) has its own absl::string_view,
// not an alias of std::string_view, so absl::StrCat does not accept a std::string_view: wrap one
// in Sv(), or concatenate with Cat(), which takes anything fmt can print.

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"

namespace ripplekv {

inline absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

// `text` for a log line or an error message about untrusted input (a peer's id, a task id, a
// path in a request): C-escaped so it cannot forge lines or terminal sequences, at most
// `max_bytes` of it, with the full length named when cut.
inline std::string EscapeForLog(std::string_view text, size_t max_bytes = 96) {
  const size_t n = std::min(text.size(), max_bytes);
  std::string out = absl::CHexEscape(absl::string_view(text.data(), n));
  if (n < text.size()) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace ripplekv
