// Row-wise KL(softmax(p) || softmax(q)) on the device, with the CPU's formula and precision
// (kernels/ops/cpu/kl_cpu.cc): one block per row, float maxima, then the exponentials and the
// vocabulary sums in double (block reductions: another order than the CPU's sequential sums, so
// equal within rounding, which the gpu tests bound), the KL clamped at 0. The per-row results are
// copied to host memory: calibration sends them on from there.

#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/ops/cuda/cuda_backend.h"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class T, class Op>
__device__ T BlockReduce(T v, T* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // the shared buffer is reused by the next reduction
  return result;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ double operator()(double a, double b) const { return a + b; }
};

__global__ void KlKernel(const float* p_logits, const float* q_logits, int64_t v, float* out) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const float* p = p_logits + blockIdx.x * v;
  const float* q = q_logits + blockIdx.x * v;
  float mp = -FLT_MAX, mq = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    mp = fmaxf(mp, p[j]);
    mq = fmaxf(mq, q[j]);
  }
  const float max_p = BlockReduce(mp, fshared, Max());
  const float max_q = BlockReduce(mq, fshared, Max());
  double sp = 0.0, sq = 0.0, cross = 0.0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const double a = static_cast<double>(p[j]) - max_p;
    const double b = static_cast<double>(q[j]) - max_q;
    const double ea = exp(a);
    sp += ea;
    sq += exp(b);
    if (ea > 0.0) cross += ea * (a - b);  // P_j = 0 contributes 0, even where Q_j = 0
  }
  const double sum_p = BlockReduce(sp, dshared, Sum());
  const double sum_q = BlockReduce(sq, dshared, Sum());
  const double sum_cross = BlockReduce(cross, dshared, Sum());
  if (threadIdx.x == 0) {
    const double kl = sum_cross / sum_p - log(sum_p / sum_q);
    out[blockIdx.x] = static_cast<float>(kl > 0.0 ? kl : 0.0);
  }
}

}  // namespace

void KlDivergenceRows(const float* p_logits, const float* q_logits, int64_t m, int64_t v,
                      float* host_out) {
  if (m == 0) return;
  float* device_out = nullptr;
  CheckCuda(cudaMalloc(&device_out, static_cast<size_t>(m) * sizeof(float)), "KL output");
  KlKernel<<<static_cast<unsigned>(m), kThreads>>>(p_logits, q_logits, v, device_out);
  CheckCuda(cudaMemcpy(host_out, device_out, static_cast<size_t>(m) * sizeof(float),
                   cudaMemcpyDeviceToHost),
        "KL to the host");
  CheckCuda(cudaFree(device_out), "KL output");
}

}  // namespace ripplekv::kernels::cuda
