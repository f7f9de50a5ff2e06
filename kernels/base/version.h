#pragma once
// The version of this build, from the project version in the top-level CMakeLists.txt. Written
// into profiles (tool_version) and reported by workers at registration and by `ripplekv
// --version`. Thread-safe.

#include <string_view>

namespace ripplekv {

// "0.1.0".
std::string_view Version();
// "ripplekv 0.1.0": how profiles name the tool that wrote them.
std::string_view ToolVersion();

}  // namespace ripplekv
