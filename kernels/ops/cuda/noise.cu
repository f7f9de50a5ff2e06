// The noise of kernels/ops/noise.h on the device. The integer part is philox.h's own code
// (Philox4x32_10, NoiseCounter, compiled for the device), so the 128-bit draws equal the CPU's bit
// for bit. The floats follow the contract's formulas with the CPU's rounding where the device can
// reproduce it:
//   - ||v||^2 is summed in double in element order by every lane of the row's warp (the products
//     of two floats are exact in double, so fused or not, the sum and hence the float scale equal
//     the CPU's bit for bit);
//   - v' = fmaf(scale, eps, v): one rounding, as the CPU's `v += scale * eps` compiles on a target
//     with FMA (the native build);
//   - eps comes from philox.h BoxMuller4 with CUDA's logf, sinf and cosf, which differ from glibc's
//     by an ulp or two on part of the inputs (noise.h states the resulting bound). This file must
//     be built without --use_fast_math, which would swap them for far less accurate intrinsics.

#include <cuda_runtime.h>

#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/noise.h"
#include "kernels/ops/philox.h"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 256;

// The fields of a NoiseKey and the generator key made from its seed.
struct Trial {
  PhiloxKey words;
  uint32_t sample, layer, trial;
};

Trial MakeTrial(uint64_t seed, int sample, int layer, int trial) {
  return Trial{NoiseKeyWords(seed), static_cast<uint32_t>(sample), static_cast<uint32_t>(layer),
               static_cast<uint32_t>(trial)};
}

// eps[4b .. 4b+3] of the value vector at (position, kv_head): noise_cpu.cc's BlockNormals.
__device__ void BlockNormals(const Trial& t, int32_t position, uint32_t kv_head, uint32_t b,
                             float z[4]) {
  const PhiloxCounter ctr =
      NoiseCounter(static_cast<uint32_t>(position), kv_head, b, t.sample, t.layer, t.trial);
  BoxMuller4(Philox4x32_10(ctr, t.words), z);
}

// out[r * head_dim + 4b .. + 3]: one thread per (row, 4-value block).
__global__ void DrawNormalsKernel(Trial t, const int32_t* positions, int64_t n, uint32_t kv_head,
                                  int64_t head_dim, float* out) {
  const int64_t blocks_per_row = head_dim / 4;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= n * blocks_per_row) return;
  const int64_t r = item / blocks_per_row, b = item % blocks_per_row;
  float z[4];
  BlockNormals(t, positions[r], kv_head, static_cast<uint32_t>(b), z);
  float* o = out + r * head_dim + 4 * b;
  for (int k = 0; k < 4; ++k) o[k] = z[k];
}

// One warp per (row r, head first_head + h), the vector at values + r * row_stride + h * head_dim.
// Every lane sums the squares itself (the same loads, broadcast), so all agree on the scale
// without a shuffle; the lanes then split the 4-value blocks.
__global__ void AddNoiseKernel(Trial t, const int32_t* positions, int64_t n, int first_head,
                               int n_heads, int64_t head_dim, int64_t row_stride, float alpha,
                               float* values) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= n * n_heads) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t r = item / n_heads;
  const int h = static_cast<int>(item % n_heads);
  float* v = values + r * row_stride + h * head_dim;
  double sum_sq = 0.0;
  for (int64_t j = 0; j < head_dim; ++j) sum_sq += static_cast<double>(v[j]) * v[j];
  __syncwarp();  // every lane has read the row before any lane writes it
  // alpha * ||v|| / sqrt(d) in double (IEEE division and square root), rounded once to float.
  const float scale = static_cast<float>(alpha * sqrt(sum_sq / static_cast<double>(head_dim)));
  if (scale == 0.0f) return;  // all-zero row: v' = v exactly
  const int32_t position = positions[r];
  const uint32_t kv_head = static_cast<uint32_t>(first_head + h);
  float z[4];
  for (int64_t b = lane; b < head_dim / 4; b += kWarp) {
    BlockNormals(t, position, kv_head, static_cast<uint32_t>(b), z);
    for (int k = 0; k < 4; ++k) v[4 * b + k] = fmaf(scale, z[k], v[4 * b + k]);
  }
}

// Heads [first_head, first_head + n_heads) of n rows, each head_dim values, rows row_stride apart.
int LaunchAddNoise(const OpContext& ctx, const Trial& t, const int32_t* positions, int64_t n,
                    int first_head, int n_heads, int64_t head_dim, int64_t row_stride, float alpha,
                    float* values) {
  if (n == 0 || alpha == 0.0f) return 0;
  const int64_t blocks = (n * n_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  AddNoiseKernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, StreamOf(ctx)>>>(
      t, positions, n, first_head, n_heads, head_dim, row_stride, alpha, values);
  return LaunchResult(ctx, "AddNormAdaptiveNoise");
}

}  // namespace

int AddNormAdaptiveNoiseToRows(const OpContext& ctx, uint64_t seed, int sample, int layer,
                                int trial, const int32_t* positions, int64_t n,
                                int first_kv_head, int n_kv_heads,
                                int head_dim, float alpha, float* values) {
  return LaunchAddNoise(ctx, MakeTrial(seed, sample, layer, trial), positions, n, first_kv_head,
                 n_kv_heads, head_dim, static_cast<int64_t>(n_kv_heads) * head_dim, alpha, values);
}

int AddNormAdaptiveNoise(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                          const int32_t* positions, int64_t n, int kv_head, int head_dim,
                          float alpha, float* values) {
  return LaunchAddNoise(ctx, MakeTrial(seed, sample, layer, trial), positions, n, kv_head, 1, head_dim,
                 head_dim, alpha, values);
}

int DrawNormals(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                 const int32_t* positions, int64_t n, int kv_head, int head_dim, float* out) {
  const int64_t items = n * (head_dim / 4);
  if (items == 0) return 0;
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  DrawNormalsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, StreamOf(ctx)>>>(
      MakeTrial(seed, sample, layer, trial), positions, n, static_cast<uint32_t>(kv_head), head_dim,
      out);
  return LaunchResult(ctx, "DrawNormals");
}

}  // namespace ripplekv::kernels::cuda
