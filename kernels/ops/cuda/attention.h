#pragma once
// The CUDA launchers of causal attention for its front end (kernels/ops/attention.h), with the
// front end's contract; every pointer (int32 ones too) is device memory unless named host_*.
// Launchers queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not
// compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// Causal attention over up to kMaxSegments cache segments (KvCacheView's fields), head_dim at
// most kMaxAttentionHeadDim.
inline constexpr int kMaxSegments = 8;
inline constexpr int64_t kMaxAttentionHeadDim = 256;
struct CacheSegment {
  const float* k;
  const float* v;
  const int32_t* positions;
  int n_kv_heads, capacity, length, head_dim;
};
[[nodiscard]] int CausalAttention(const OpContext& ctx, const float* q, const int32_t* q_positions, int64_t m,
                    int64_t n_heads, int64_t head_dim, const CacheSegment* segments,
                    int n_segments, float scale, float* out);

}  // namespace ripplekv::kernels::cuda
