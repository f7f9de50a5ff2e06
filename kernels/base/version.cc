#include "kernels/base/version.h"

// RIPPLEKV_VERSION is defined by kernels/CMakeLists.txt from PROJECT_VERSION.
#ifndef RIPPLEKV_VERSION
#error "RIPPLEKV_VERSION must be defined by the build"
#endif

namespace ripplekv {

std::string_view Version() { return RIPPLEKV_VERSION; }

std::string_view ToolVersion() { return "ripplekv " RIPPLEKV_VERSION; }

}  // namespace ripplekv
