#pragma once
// SwiGLU: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// out = silu(gate) * up. gate, up, out: [M, F]; out may alias gate or up.
[[nodiscard]] Status SwiGlu(const OpContext& ctx, const ConstTensorView& gate,
                            const ConstTensorView& up, const TensorView& out);

// The residual add: y += x, element by element; x and y of one shape, y must not alias x.
[[nodiscard]] Status AddTo(const OpContext& ctx, const ConstTensorView& x, const TensorView& y);

}  // namespace ripplekv::kernels
