#pragma once
// Row-wise log-sum-exp, log-softmax and KL divergence of fp32 logits (max-subtracted, so no
// overflow).
//
// Vocabulary-parallel logits: when ctx.communicator has more than one rank, each rank's rows hold
// its slice of the vocabulary (a tensor-parallel LM head), and LogSumExp and KlDivergenceRows
// return the values over the whole vocabulary on every rank, combined from per-rank maxima and
// partial sums (no logits row is gathered). Every rank must call them together.

#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// x: [M, V], V >= 1 (InvalidArgument otherwise) → lse: [M], lse[i] = log(sum_j exp(x[i, j])).
// lse is host memory on every device.
[[nodiscard]] Status LogSumExp(const OpContext& ctx, const ConstTensorView& x, std::span<float> lse);

// x, y: [M, V] (y may alias x): y = x - logsumexp(x).
[[nodiscard]] Status LogSoftmax(const OpContext& ctx, const ConstTensorView& x, const TensorView& y);

// p_logits, q_logits: [M, V]. out: [M], out[i] = KL(softmax(p_i) || softmax(q_i)) in nats,
// summed over the full vocabulary: sum_j P_ij (log P_ij - log Q_ij). Each row is max-subtracted,
// the exponentials and the vocabulary sums are accumulated in double, and the result is clamped at
// 0 (it can round a hair below). Identical rows give exactly 0. Logits should be finite; an entry
// of -inf is a zero-probability token (a token with P > 0 and Q = 0 gives +inf).
// InvalidArgument when the shapes differ, are not rank 2, V == 0 or out.size() != M.
// Results do not depend on ctx.num_threads. out is host memory on every device (the per-row KLs
// are few, and calibration sends them on from the host).
[[nodiscard]] Status KlDivergenceRows(const OpContext& ctx, const ConstTensorView& p_logits,
                                      const ConstTensorView& q_logits, std::span<float> out);

}  // namespace ripplekv::kernels
