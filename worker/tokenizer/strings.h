#pragma once
// String building for this library. (Debian's Abseil has its own string_view type, so
// absl::StrCat does not take std::string_view; fmt does.)

#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "fmt/format.h"

namespace ripplekv::worker::tokenizer_internal {

template <typename T>
const T& Printable(const T& value) {
  return value;
}
inline std::string_view Printable(absl::string_view s) { return {s.data(), s.size()}; }

// Concatenates anything fmt can print, and absl::string_view (Status::message()).
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", Printable(args)), ...);
  return out;
}

template <typename... Args>
void Append(std::string* out, const Args&... args) {
  (fmt::format_to(std::back_inserter(*out), "{}", Printable(args)), ...);
}

// For Abseil hash-container lookups.
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace ripplekv::worker::tokenizer_internal
