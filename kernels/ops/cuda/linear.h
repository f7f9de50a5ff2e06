#pragma once
// The CUDA launchers of the linear layer for its front end (kernels/ops/linear.h), with the front
// end's contract; every pointer (int32 ones too) is device memory unless named host_*. Launchers
// queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// y [m, n] (fp32) = x [m, k] (fp32) * w [n, k]^T (+ y when accumulate) + bias [n] (fp32, or null),
// through cuBLAS on ctx.blas. With bf16 weights (w_bf16) x is rounded to bf16 (in the stream's
// memory pool) and the GEMM accumulates in fp32; with fp32 weights the GEMM is pedantic fp32 (no
// TF32), the cross-check mode.
[[nodiscard]] int Linear(const OpContext& ctx, const float* x, const void* w, bool w_bf16, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate);

}  // namespace ripplekv::kernels::cuda
