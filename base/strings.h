#pragma once
// String helpers for error messages. Debian's Abseil (20220623) has its own absl::string_view,
// not an alias of std::string_view, so absl::StrCat does not accept a std::string_view: wrap one
// in Sv(), or concatenate with Cat(), which takes anything fmt can print.

#include <iterator>
#include <string>
#include <string_view>

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

}  // namespace ripplekv
