// RoPE on the CPU. Parallel over rows; the angles in double, the rotation in fp32, each row on its
// own, so results do not depend on the thread count.

#include <cmath>
#include <vector>

#include "kernels/ops/cpu/rope_cpu.h"

namespace ripplekv::kernels::cpu {

void ApplyRope(int num_threads, const RopeTable& table, const int32_t* positions, float* x,
               int64_t m, int64_t n_heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const bool interleaved = table.pairing == RopePairing::kInterleaved;
#pragma omp parallel num_threads(num_threads) if (m > 1)
  {
    std::vector<float> cos_t(half), sin_t(half);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < half; ++p) {
        const double angle = static_cast<double>(positions[i]) * table.inv_freq[p];
        cos_t[p] = static_cast<float>(std::cos(angle));
        sin_t[p] = static_cast<float>(std::sin(angle));
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (i * n_heads + h) * head_dim;
        for (int64_t p = 0; p < half; ++p) {
          const int64_t a = interleaved ? 2 * p : p;
          const int64_t b = interleaved ? 2 * p + 1 : p + half;
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * cos_t[p] - x1 * sin_t[p];
          v[b] = x0 * sin_t[p] + x1 * cos_t[p];
        }
      }
    }
  }
}

}  // namespace ripplekv::kernels::cpu
