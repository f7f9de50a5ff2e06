// KV-cache writes on the device (kernels/ops/kv_cache.h): pure data movement, so the results equal
// the CPU's bit for bit.

#include <cuda_runtime.h>

#include "kernels/ops/cuda/kv_cache.h"
#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 128;

// One block per (token, head): its key and value vectors into the head's next entries.
__global__ void KvAppendKernel(const float* k_rows, const float* v_rows, const int32_t* positions,
                               CacheLayer layer) {
  const int64_t i = blockIdx.x, h = blockIdx.y, d = layer.head_dim;
  const int64_t row = static_cast<int64_t>(layer.n_kv_heads) * d;
  const int64_t entry = h * layer.capacity + layer.length + i;
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    layer.k[entry * d + e] = k_rows[i * row + h * d + e];
    layer.v[entry * d + e] = v_rows[i * row + h * d + e];
  }
  if (threadIdx.x == 0) layer.positions[entry] = positions[i];
}

// One block per head, threads over the vector's elements, entries in order: entry j takes entry
// keep[j] >= j, and each thread moves only its own element, so no entry is read after it was
// overwritten.
__global__ void KvRetainKernel(const int32_t* keep, int count, CacheLayer layer) {
  const int64_t h = blockIdx.x, d = layer.head_dim, base = h * layer.capacity;
  const int32_t* idx = keep + h * count;
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t src = base + idx[j];
      layer.k[(base + j) * d + e] = layer.k[src * d + e];
      layer.v[(base + j) * d + e] = layer.v[src * d + e];
    }
  }
  if (threadIdx.x == 0) {
    for (int64_t j = 0; j < count; ++j) layer.positions[base + j] = layer.positions[base + idx[j]];
  }
}

}  // namespace

int KvAppend(const OpContext& ctx, const float* k_rows, const float* v_rows, const int32_t* positions, int64_t n,
              const CacheLayer& layer) {
  if (n == 0) return 0;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(layer.n_kv_heads));
  KvAppendKernel<<<grid, kThreads, 0, StreamOf(ctx)>>>(k_rows, v_rows, positions, layer);
  return LaunchResult(ctx, "KvAppend");
}

int KvRetain(const OpContext& ctx, const int32_t* keep, int count, const CacheLayer& layer) {
  KvRetainKernel<<<static_cast<unsigned>(layer.n_kv_heads), kThreads, 0, StreamOf(ctx)>>>(keep, count, layer);
  return LaunchResult(ctx, "KvRetain");
}

}  // namespace ripplekv::kernels::cuda
