#pragma once
// Row-wise log-sum-exp and log-softmax in fp32 (max-subtracted, so no overflow).

#include <span>

#include "kernels/base/status.h"
#include "kernels/base/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// x: [M, V] → lse: [M], lse[i] = log(sum_j exp(x[i, j])).
[[nodiscard]] Status LogSumExp(const OpContext& ctx, const ConstTensorView& x, std::span<float> lse);

// x, y: [M, V] (y may alias x): y = x - logsumexp(x).
[[nodiscard]] Status LogSoftmax(const OpContext& ctx, const ConstTensorView& x, const TensorView& y);

}  // namespace ripplekv::kernels
