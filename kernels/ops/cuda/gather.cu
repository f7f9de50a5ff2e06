// Row gathers on the device (kernels/ops/gather.h): pure data movement, so the results equal the
// CPU's bit for bit.

#include <cuda_runtime.h>

#include "kernels/ops/cuda/gather.h"
#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 128;

// One block per gathered row.
__global__ void GatherRowsKernel(const float* src, int64_t d, const int32_t* rows, float* out) {
  const float* from = src + static_cast<int64_t>(rows[blockIdx.x]) * d;
  float* to = out + static_cast<int64_t>(blockIdx.x) * d;
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) to[e] = from[e];
}

}  // namespace

int GatherRows(const OpContext& ctx, const float* src, int64_t d, const int32_t* rows, int64_t n_rows, float* out) {
  if (n_rows == 0 || d == 0) return 0;
  GatherRowsKernel<<<static_cast<unsigned>(n_rows), kThreads, 0, StreamOf(ctx)>>>(src, d, rows, out);
  return LaunchResult(ctx, "GatherRows");
}

int CopyRows(const OpContext& ctx, const float* src, int64_t d, int64_t first, int64_t n_rows, float* out) {
  if (n_rows == 0 || d == 0) return 0;
  CheckCuda(cudaMemcpyAsync(out, src + first * d, static_cast<size_t>(n_rows * d) * sizeof(float),
                            cudaMemcpyDeviceToDevice, StreamOf(ctx)),
            "CopyRows");
  return LaunchResult(ctx, "CopyRows");
}

}  // namespace ripplekv::kernels::cuda
