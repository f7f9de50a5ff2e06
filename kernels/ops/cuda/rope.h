#pragma once
// The CUDA launchers of RoPE for its front end (kernels/ops/rope.h), with the front end's contract;
// every pointer (int32 ones too) is device memory unless named host_*. Launchers queue their work
// on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// RoPE with the table's frequencies (host memory, at most kMaxRopePairs: head_dim <= 512).
inline constexpr int64_t kMaxRopePairs = 256;
[[nodiscard]] int ApplyRope(const OpContext& ctx, const float* inv_freq, int64_t pairs, bool interleaved,
               const int32_t* positions, float* x, int64_t m, int64_t n_heads, int64_t head_dim);

}  // namespace ripplekv::kernels::cuda
