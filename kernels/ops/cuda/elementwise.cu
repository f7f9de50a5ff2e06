// Row-wise and element-wise CUDA kernels: RMSNorm and SwiGLU, with the CPU's arithmetic
// (kernels/ops/cpu/elementwise_cpu.cc): RMSNorm sums squares in double (a block reduction, so the
// order differs from the CPU's sequential sum; tested within tolerance) and scales in float.

#include <cuda_runtime.h>

#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 256;

// One block per row: the sum of squares in double, then y = x * inv * w.
__global__ void RmsNormKernel(const float* x, const float* weight, float eps, float* y,
                              int64_t d) {
  __shared__ double partial[kThreads];
  const float* xi = x + blockIdx.x * d;
  float* yi = y + blockIdx.x * d;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += static_cast<double>(xi[j]) * xi[j];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv = static_cast<float>(1.0 / sqrt(partial[0] / d + eps));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yi[j] = xi[j] * inv * weight[j];
}

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void AddToKernel(const float* x, float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

}  // namespace

void RmsNorm(const OpContext& ctx, const float* x, const float* weight, float eps, float* y, int64_t m, int64_t d) {
  if (m == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(m), kThreads, 0, StreamOf(ctx)>>>(x, weight, eps, y, d);
}

void SwiGlu(const OpContext& ctx, const float* gate, const float* up, float* out, int64_t n) {
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  SwiGluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, StreamOf(ctx)>>>(gate, up, out, n);
}

void AddTo(const OpContext& ctx, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  AddToKernel<<<static_cast<unsigned>(blocks), kThreads, 0, StreamOf(ctx)>>>(x, y, n);
}

}  // namespace ripplekv::kernels::cuda
