#pragma once
// The CUDA launchers of RMSNorm for its front end (kernels/ops/norm.h), with the front end's
// contract; every pointer (int32 ones too) is device memory unless named host_*. Launchers queue
// their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

[[nodiscard]] int RmsNorm(const OpContext& ctx, const float* x, const float* weight, float eps, float* y,
             int64_t m, int64_t d);

}  // namespace ripplekv::kernels::cuda
