// The linear layer on CUDA: one cuBLAS GEMM per call on the session's handle (ctx.blas, bound to
// ctx.stream). Row-major y [m, n] = x [m, k] * w [n, k]^T is, in cuBLAS's column-major terms,
// y^T [n, m] = op_T(w as [k, n]) * x^T [k, m]: transa = T, transb = N, no copies.

#include <cuda_bf16.h>

#include "kernels/ops/cuda/cublas_api.h"
#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/linear.h"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void ToBf16Kernel(const float* x, __nv_bfloat16* out, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2bfloat16_rn(x[i]);
}

// y[i, j] += bias[j].
__global__ void AddBiasKernel(const float* bias, float* y, int64_t n, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) y[i] += bias[i % n];
}

unsigned BlocksFor(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

}  // namespace

int Linear(const OpContext& ctx, const float* x, const void* w, bool w_bf16, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate) {
  if (m == 0 || n == 0) return 0;
  cudaStream_t stream = StreamOf(ctx);
  const CublasApi* blas = Cublas(nullptr);  // loaded: the session that made ctx.blas loaded it
  auto handle = static_cast<cublasHandle_t>(ctx.blas);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (w_bf16) {
    __nv_bfloat16* xb = nullptr;
    const int64_t count = m * k;
    if (int e = MallocAsync(reinterpret_cast<void**>(&xb),
                            static_cast<size_t>(count) * sizeof(__nv_bfloat16), stream,
                            "Linear: bf16 activations");
        e != 0) {
      return e;
    }
    if (count > 0) ToBf16Kernel<<<BlocksFor(count), kThreads, 0, stream>>>(x, xb, count);
    int e = LaunchResult(ctx, "Linear: bf16 activations");
    if (e == 0) {
      CheckCublasStatus(blas->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, w,
                                      CUDA_R_16BF, ki, xb, CUDA_R_16BF, ki, &beta, y, CUDA_R_32F,
                                      ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "Linear: cublasGemmEx (bf16)");
      e = LaunchResult(ctx, "Linear: cublasGemmEx (bf16)");
    }
    CheckCuda(cudaFreeAsync(xb, stream), "Linear: bf16 activations");
    if (e != 0) return e;
  } else {
    CheckCublasStatus(blas->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, w,
                                    CUDA_R_32F, ki, x, CUDA_R_32F, ki, &beta, y, CUDA_R_32F, ni,
                                    CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                      "Linear: cublasGemmEx (fp32)");
    if (int e = LaunchResult(ctx, "Linear: cublasGemmEx (fp32)"); e != 0) return e;
  }
  if (bias != nullptr) {
    AddBiasKernel<<<BlocksFor(m * n), kThreads, 0, stream>>>(bias, y, n, m * n);
    return LaunchResult(ctx, "Linear: bias");
  }
  return 0;
}

}  // namespace ripplekv::kernels::cuda
