#pragma once
// The OpenBLAS this process runs with, as the library reports itself (openblas_get_config), for
// --version: "0.3.21 (DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64)". Thread-safe.

#include <string>

namespace ripplekv::kernels {

std::string OpenBlasVersion();

}  // namespace ripplekv::kernels
