// Row-wise and element-wise CPU kernels: RMSNorm, RoPE, SwiGLU, log-sum-exp. Parallel over rows;
// each row is reduced in a fixed order, so results do not depend on the thread count.

#include <cmath>
#include <vector>

#include "kernels/ops/cpu/cpu_ops.h"
#include "kernels/ops/cpu/vec_math.h"

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

void AddTo(int num_threads, const float* x, float* y, int64_t n) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void SwiGlu(int num_threads, const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd num_threads(num_threads) schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + ExpF(-g)) * up[i];
  }
}

void LogSumExp(int num_threads, const float* x, int64_t m, int64_t v, float* lse) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (m > 1)
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * v;
    float mx = xi[0];
    for (int64_t j = 1; j < v; ++j) mx = std::max(mx, xi[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(xi[j] - mx));
    lse[i] = mx + static_cast<float>(std::log(sum));
  }
}

}  // namespace ripplekv::kernels::cpu
