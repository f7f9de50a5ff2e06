// Causal GQA attention on the device over one or more cache segments (kernels/ops/attention.h):
// one warp per (query, head) walks the visible keys of every segment with an online softmax in
// fp32 (running maximum, rescaled sum and output), so no score matrix is stored whatever the
// cache length. A first, simple kernel: correct for every shape the CPU takes, not yet tiled for
// tensor cores. Differs from the CPU (BLAS dots, one softmax pass) in rounding only: the gpu
// tests bound it.

#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kMaxHeadDim = static_cast<int>(kMaxAttentionHeadDim);  // lane registers: / kWarp
constexpr int kWarpsPerBlock = 4;

struct Segments {
  CacheSegment s[kMaxSegments];
  int count;
};

__device__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Query row `i` of head `h`: q and out rows at (i * n_heads + h) * d.
__global__ void AttentionKernel(const float* q, const int32_t* q_positions, int64_t m,
                                int64_t n_heads, int64_t d, Segments segs, float scale,
                                float* out) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= m * n_heads) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t i = item / n_heads, h = item % n_heads;
  const int64_t kvh = h / (n_heads / segs.s[0].n_kv_heads);
  const float* qi = q + (i * n_heads + h) * d;
  const int32_t qpos = q_positions[i];
  constexpr int kPerLane = kMaxHeadDim / kWarp;
  float acc[kPerLane];
  float qv[kPerLane];
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t e = lane + r * kWarp;
    acc[r] = 0.0f;
    qv[r] = e < d ? qi[e] : 0.0f;
  }
  float running_max = -FLT_MAX, running_sum = 0.0f;
  for (int s = 0; s < segs.count; ++s) {
    const CacheSegment& seg = segs.s[s];
    const float* k = seg.k + kvh * seg.capacity * d;
    const float* v = seg.v + kvh * seg.capacity * d;
    const int32_t* pos = seg.positions + kvh * seg.capacity;
    for (int64_t j = 0; j < seg.length && pos[j] <= qpos; ++j) {  // entries are position-sorted
      float partial = 0.0f;
      for (int r = 0; r < kPerLane; ++r) {
        const int64_t e = lane + r * kWarp;
        if (e < d) partial += qv[r] * k[j * d + e];
      }
      const float score = WarpSum(partial) * scale;
      const float new_max = fmaxf(running_max, score);
      const float correction = expf(running_max - new_max);  // 0 for the first key
      const float p = expf(score - new_max);
      running_sum = running_sum * correction + p;
      for (int r = 0; r < kPerLane; ++r) {
        const int64_t e = lane + r * kWarp;
        if (e < d) acc[r] = acc[r] * correction + p * v[j * d + e];
      }
      running_max = new_max;
    }
  }
  float* oi = out + (i * n_heads + h) * d;
  const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;  // no visible key: zeros
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t e = lane + r * kWarp;
    if (e < d) oi[e] = acc[r] * inv;
  }
}

}  // namespace

void CausalAttention(const OpContext& ctx, const float* q, const int32_t* q_positions, int64_t m, int64_t n_heads,
                     int64_t head_dim, const CacheSegment* segments, int n_segments, float scale,
                     float* out) {
  if (m == 0) return;
  Segments segs{};
  for (int s = 0; s < n_segments; ++s) segs.s[s] = segments[s];
  segs.count = n_segments;
  const int64_t items = m * n_heads;
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  AttentionKernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, StreamOf(ctx)>>>(
      q, q_positions, m, n_heads, head_dim, segs, scale, out);
}

}  // namespace ripplekv::kernels::cuda
