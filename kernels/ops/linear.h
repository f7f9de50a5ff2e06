#pragma once
// y = x * W^T (+ bias), the linear layer of every projection.

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/dequant/weight.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

struct LinearOptions {
  bool accumulate = false;  // y += x * W^T instead of y = x * W^T (fuses the residual add)
};

// x: [M, K], w: [N, K] (row-major, the GGUF/HF weight layout), bias: [N] or empty, y: [M, N],
// all contiguous; y must not alias x or w. InvalidArgument on shape mismatch. Thread-safe (no
// shared state).
[[nodiscard]] Status Linear(const OpContext& ctx, const ConstTensorView& x,
                            const ConstTensorView& w, const ConstTensorView& bias,
                            const TensorView& y, const LinearOptions& options = {});

// The same over weights in their stored type (kernels/dequant/weight.h), w: [N, K]. The output
// columns are computed in the same fixed 128-column slices as above; a slice of a stored weight is
// expanded into a per-thread fp32 buffer right before its BLAS call, so for M > 1 the result is
// bit-identical to Linear over w.Expand() (same values, same calls). fp32 weights (expanded, or
// stored F32) take the path above directly. Scratch: 128 * K floats per thread.
[[nodiscard]] Status Linear(const OpContext& ctx, const ConstTensorView& x, const Weight& w,
                            const ConstTensorView& bias, const TensorView& y,
                            const LinearOptions& options = {});

}  // namespace ripplekv::kernels
