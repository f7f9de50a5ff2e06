#include "kernels/ops/cpu/blas_threads.h"

#include <cblas.h>

#include <mutex>

namespace ripplekv::kernels::cpu {

void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace ripplekv::kernels::cpu
