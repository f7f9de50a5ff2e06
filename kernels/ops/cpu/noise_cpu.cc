// CPU reference of the noise contract (kernels/ops/noise.h). Parallel over rows; every value is a
// pure function of (key, position, head, element), so results do not depend on the thread count.

#include <cmath>

#include "kernels/ops/cpu/noise_cpu.h"
#include "kernels/ops/philox.h"

namespace ripplekv::kernels::cpu {
namespace {

// eps[4b .. 4b+3] of the value vector at (position, kv_head) in trial `key`.
inline void BlockNormals(const NoiseKey& key, const PhiloxKey& words, int32_t position, int kv_head,
                         int64_t b, float z[4]) {
  const PhiloxCounter ctr =
      NoiseCounter(static_cast<uint32_t>(position), static_cast<uint32_t>(kv_head),
                   static_cast<uint32_t>(b), static_cast<uint32_t>(key.sample),
                   static_cast<uint32_t>(key.layer), static_cast<uint32_t>(key.trial));
  BoxMuller4(Philox4x32_10(ctr, words), z);
}

}  // namespace

void DrawNormals(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                 int kv_head, int64_t head_dim, float* out) {
  const PhiloxKey words = NoiseKeyWords(key.seed);
#pragma omp parallel for num_threads(num_threads) schedule(static) if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < head_dim / 4; ++b) {
      BlockNormals(key, words, positions[r], kv_head, b, out + r * head_dim + 4 * b);
    }
  }
}

void AddNormAdaptiveNoise(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                          int kv_head, float alpha, float* values, int64_t head_dim,
                          int64_t row_stride) {
  const PhiloxKey words = NoiseKeyWords(key.seed);
  const double d = static_cast<double>(head_dim);
#pragma omp parallel num_threads(num_threads) if (n > 1)
  {
    float z[4];
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      float* v = values + r * row_stride;
      double sum_sq = 0.0;
      for (int64_t j = 0; j < head_dim; ++j) sum_sq += static_cast<double>(v[j]) * v[j];
      // alpha * ||v|| / sqrt(d), rounded once to float (the contract's scale).
      const float scale = static_cast<float>(alpha * std::sqrt(sum_sq / d));
      if (scale == 0.0f) continue;  // all-zero row: v' = v exactly
      for (int64_t b = 0; b < head_dim / 4; ++b) {
        BlockNormals(key, words, positions[r], kv_head, b, z);
        for (int k = 0; k < 4; ++k) v[4 * b + k] += scale * z[k];
      }
    }
  }
}

}  // namespace ripplekv::kernels::cpu
