#pragma once
// The CPU backend of the noise (kernels/ops/noise.h), the reference of its contract; called only by
// the front end after its checks (no re-validation).

#include <cstdint>

#include "kernels/ops/noise.h"

namespace ripplekv::kernels::cpu {

void DrawNormals(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                 int kv_head, int64_t head_dim, float* out);
// values: n rows of head_dim floats, row r at values + r * row_stride.
void AddNormAdaptiveNoise(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                          int kv_head, float alpha, float* values, int64_t head_dim,
                          int64_t row_stride);

}  // namespace ripplekv::kernels::cpu
