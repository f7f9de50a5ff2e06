#pragma once
// The CUDA launchers of the noise for its front end (kernels/ops/noise.h), with the front end's
// contract; every pointer (int32 ones too) is device memory unless named host_*. Launchers queue
// their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// The noise of kernels/ops/noise.h, per its contract (Philox bit-identical to the CPU's; the
// Box-Muller floats from CUDA's logf/sinf/cosf). values: [n, n_kv_heads * head_dim], positions:
// [n], both device memory.
[[nodiscard]] int AddNormAdaptiveNoiseToRows(const OpContext& ctx, uint64_t seed, int sample, int layer,
                                int trial, const int32_t* positions, int64_t n, int first_kv_head,
                                int n_kv_heads, int head_dim, float alpha, float* values);
// The standard normals of DrawNormals for one KV head: out [n, head_dim] (device memory).
[[nodiscard]] int DrawNormals(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                 const int32_t* positions, int64_t n, int kv_head, int head_dim, float* out);

// AddNormAdaptiveNoise for one KV head: values [n, head_dim] (device memory) get the noise of
// head kv_head, as AddNormAdaptiveNoiseToRows gives that head.
[[nodiscard]] int AddNormAdaptiveNoise(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                          const int32_t* positions, int64_t n, int kv_head, int head_dim,
                          float alpha, float* values);

}  // namespace ripplekv::kernels::cuda
