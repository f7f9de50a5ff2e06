// SwiGLU and the residual add on the device, element by element, with the CPU's formulas
// (kernels/ops/cpu/activation_cpu.cc).

#include <cuda_runtime.h>

#include "kernels/ops/cuda/activation.h"
#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 256;

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

int SwiGlu(const OpContext& ctx, const float* gate, const float* up, float* out, int64_t n) {
  if (n == 0) return 0;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  SwiGluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, StreamOf(ctx)>>>(gate, up, out, n);
  return LaunchResult(ctx, "SwiGlu");
}

int AddTo(const OpContext& ctx, const float* x, float* y, int64_t n) {
  if (n == 0) return 0;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  AddToKernel<<<static_cast<unsigned>(blocks), kThreads, 0, StreamOf(ctx)>>>(x, y, n);
  return LaunchResult(ctx, "AddTo");
}

}  // namespace ripplekv::kernels::cuda
