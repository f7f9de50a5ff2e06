// RMSNorm on the CPU. Parallel over rows; each row is reduced in a fixed order, so results do not
// depend on the thread count.

#include <cmath>

#include "kernels/ops/cpu/norm_cpu.h"

namespace ripplekv::kernels::cpu {

void RmsNorm(int num_threads, const float* x, const float* weight, float eps, float* y, int64_t m,
             int64_t d) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (m > 1)
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * d;
    float* yi = y + i * d;
    double sum = 0.0;
    for (int64_t j = 0; j < d; ++j) sum += static_cast<double>(xi[j]) * xi[j];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / d + eps));
    for (int64_t j = 0; j < d; ++j) yi[j] = xi[j] * inv * weight[j];
  }
}

}  // namespace ripplekv::kernels::cpu
