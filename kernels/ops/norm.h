#pragma once
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, row by row.

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// x, y: [M, D] (y may alias x), weight: [D]. Sums in fp32 in a fixed order (thread-count invariant).
[[nodiscard]] Status RmsNorm(const OpContext& ctx, const ConstTensorView& x,
                             const ConstTensorView& weight, float eps, const TensorView& y);

}  // namespace ripplekv::kernels
