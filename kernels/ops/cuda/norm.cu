// RMSNorm on the device, with the CPU's arithmetic (kernels/ops/cpu/norm_cpu.cc): it sums squares
// in double (a block reduction, so the order differs from the CPU's sequential sum; tested within
// tolerance) and scales in float.

#include <cuda_runtime.h>

#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/norm.h"

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

}  // namespace

int RmsNorm(const OpContext& ctx, const float* x, const float* weight, float eps, float* y, int64_t m, int64_t d) {
  if (m == 0) return 0;
  RmsNormKernel<<<static_cast<unsigned>(m), kThreads, 0, StreamOf(ctx)>>>(x, weight, eps, y, d);
  return LaunchResult(ctx, "RmsNorm");
}

}  // namespace ripplekv::kernels::cuda
