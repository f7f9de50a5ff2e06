#pragma once
// The CUDA launchers of log-sum-exp, log-softmax and the KL for its front end
// (kernels/ops/softmax.h), with the front end's contract; every pointer (int32 ones too) is device
// memory unless named host_*. Launchers queue their work on ctx.stream (cuda_device.h). Free of
// Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// KL per row of device logits, written to host memory (host_out: m floats); synchronous.
[[nodiscard]] int KlDivergenceRows(const OpContext& ctx, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* host_out);
// Log-sum-exp of each row of device logits x [m, v] (v >= 1), written to host memory (host_lse:
// m floats); synchronous.
[[nodiscard]] int LogSumExp(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* host_lse);
// The vocabulary-parallel pieces of the KL and the log-sum-exp over a rank's slice of the
// vocabulary (kernels/ops/softmax.cc combines them over ranks), softmax_cpu.cc's steps: the rows'
// maxima (KL: [2m], (max p, max q) per row; log-sum-exp: [m]), then the sums against the whole
// rows' maxima (KL: [3m], (Sp, Sq, cross); log-sum-exp: [m], sum exp(x - max)). Logits are
// device memory; maxima and sums host memory; synchronous.
[[nodiscard]] int KlRowMaxima(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                 double* host_maxima);
[[nodiscard]] int KlPartialSums(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                   const double* host_maxima, double* host_sums);
[[nodiscard]] int RowMaxima(const OpContext& ctx, const float* x, int64_t m, int64_t v, double* host_maxima);
[[nodiscard]] int ExpSums(const OpContext& ctx, const float* x, int64_t m, int64_t v, const double* host_maxima,
             double* host_sums);
// y = x - logsumexp(x) per row; x, y [m, v] (v >= 1) device memory, y may be x.
[[nodiscard]] int LogSoftmax(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* y);

}  // namespace ripplekv::kernels::cuda
