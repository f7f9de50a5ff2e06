#include "kernels/ops/cpu/openblas_version.h"

#include <cblas.h>

#include <string_view>

namespace ripplekv::kernels {

std::string OpenBlasVersion() {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  std::string_view config = openblas_get_config();
  constexpr std::string_view kPrefix = "OpenBLAS ";
  if (config.starts_with(kPrefix)) config.remove_prefix(kPrefix.size());
  const size_t space = config.find(' ');
  if (space == std::string_view::npos) return std::string(config);
  return std::string(config.substr(0, space)) + " (" + std::string(config.substr(space + 1)) + ")";
}

}  // namespace ripplekv::kernels
