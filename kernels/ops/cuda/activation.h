#pragma once
// The CUDA launchers of SwiGLU and the residual add for its front end (kernels/ops/activation.h),
// with the front end's contract; every pointer (int32 ones too) is device memory unless named
// host_*. Launchers queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does
// not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

[[nodiscard]] int SwiGlu(const OpContext& ctx, const float* gate, const float* up, float* out, int64_t n);
[[nodiscard]] int AddTo(const OpContext& ctx, const float* x, float* y, int64_t n);

}  // namespace ripplekv::kernels::cuda
