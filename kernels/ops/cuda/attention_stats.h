#pragma once
// The CUDA launchers of the attention statistics for its front end (kernels/ops/attention_stats.h),
// with the front end's contract; every pointer (int32 ones too) is device memory unless named
// host_*. Launchers queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does
// not compile.

#include <cstdint>

#include "kernels/ops/cuda/attention.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// The attention statistics in double, against the keys of one cache (`keys`: device memory, its
// values unused; keys.length >= 1). q is device memory, the outputs host memory; both calls are
// synchronous and return their LaunchResult (cuda_device.h).
// Window: q [w, n_heads, head_dim] (1 <= w <= keys.length); host_sum, host_sumsq
// [n_heads, keys.length]; the entropy in *host_entropy.
[[nodiscard]] int WindowAttentionStats(const OpContext& ctx, const float* q, int64_t w, int64_t n_heads,
                         const CacheSegment& keys, double scale, double entropy_epsilon,
                         double* host_sum, double* host_sumsq, double* host_entropy);
// H2O's accumulated attention: q [keys.length, n_heads, head_dim]; host_accumulated
// [n_kv_heads, keys.length].
[[nodiscard]] int AccumulatedAttention(const OpContext& ctx, const float* q, int64_t n_heads,
                         const CacheSegment& keys, double scale, double* host_accumulated);

}  // namespace ripplekv::kernels::cuda
