#pragma once
// The CUDA backend's entry points for the op front ends and devices.cc (internal: include only
// from kernels/ops/). Launchers take device pointers the front ends checked and run on the
// current device's default stream; they return after queuing (callers copy results back with the
// allocator, which synchronizes).

#include <cstdint>
#include <string>

#include "kernels/base/allocator.h"

namespace ripplekv::kernels::cuda {

// Aborts with the runtime's message when `error` (a cudaError_t) is not cudaSuccess: for the
// backend's internal calls that have no Status channel (allocators, synchronous copies).
void CheckCuda(int error, const char* what);

// Visible CUDA devices; 0 and the runtime's reason in *why when there are none.
int DeviceCount(std::string* why);
// The allocator of device `ordinal` (< DeviceCount), created on first use, alive for the process.
Allocator* DeviceAllocatorFor(int ordinal);

// The ops of kernels/ops/*.h, same contracts, fp32 on the device; every pointer (int32 ones too)
// is device memory.
void RmsNorm(const float* x, const float* weight, float eps, float* y, int64_t m, int64_t d);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);
// RoPE with the table's frequencies (host memory, at most kMaxRopePairs: head_dim <= 512).
inline constexpr int64_t kMaxRopePairs = 256;
void ApplyRope(const float* inv_freq, int64_t pairs, bool interleaved, const int32_t* positions,
               float* x, int64_t m, int64_t n_heads, int64_t head_dim);
// KL per row of device logits, written to host memory (host_out: m floats); synchronous.
void KlDivergenceRows(const float* p_logits, const float* q_logits, int64_t m, int64_t v,
                      float* host_out);
void GatherRows(const float* src, int64_t d, const int32_t* rows, int64_t n_rows, float* out);
void CopyRows(const float* src, int64_t d, int64_t first, int64_t n_rows, float* out);
// One cache layer's device memory (KvLayerRef's fields; this header stays free of Abseil, which
// nvcc does not compile).
struct CacheLayer {
  float* k;
  float* v;
  int32_t* positions;
  int n_kv_heads, capacity, length, head_dim;
};
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
void CausalAttention(const float* q, const int32_t* q_positions, int64_t m, int64_t n_heads,
                     int64_t head_dim, const CacheSegment* segments, int n_segments, float scale,
                     float* out);
void KvAppend(const float* k_rows, const float* v_rows, const int32_t* positions, int64_t n,
              const CacheLayer& layer);
void KvRetain(const int32_t* keep, int count, const CacheLayer& layer);

}  // namespace ripplekv::kernels::cuda
