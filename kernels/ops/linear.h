#pragma once
// y = x * W^T (+ bias), the linear layer of every projection.

#include "kernels/base/status.h"
#include "kernels/base/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

struct LinearOptions {
  bool accumulate = false;  // y += x * W^T instead of y = x * W^T (fuses the residual add)
};

// x: [M, K], w: [N, K] (row-major, the GGUF/HF weight layout), bias: [N] or empty, y: [M, N],
// all contiguous; y must not alias x or w. InvalidArgument on shape mismatch. Thread-safe (no shared state).
[[nodiscard]] Status Linear(const OpContext& ctx, const ConstTensorView& x, const ConstTensorView& w,
                            const ConstTensorView& bias, const TensorView& y,
                            const LinearOptions& options = {});

}  // namespace ripplekv::kernels
