// Row-wise KL(softmax(p) || softmax(q)), log-sum-exp and log-softmax on the device, with the CPU's
// formulas and precision (kernels/ops/cpu/kl_cpu.cc, elementwise_cpu.cc): one block per row, float
// maxima, then the exponentials and the vocabulary sums in double (block reductions: another order
// than the CPU's sequential sums, so equal within rounding, which the gpu tests bound), the KL
// clamped at 0. Per-row results (KL, log-sum-exp) are copied to host memory: calibration and the
// perplexity evaluation read them there.

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>

#include "kernels/ops/cuda/launch.cuh"

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

// log(sum_j exp(x[j])) of row blockIdx.x as the CPU computes it: the float maximum mx, the terms
// exp(double(x[j] - mx)) (the difference in float) summed in double, then mx + float(log(sum)).
// With y, writes y[j] = x[j] - lse (y may be x: each thread rewrites only entries it has read,
// after the last reduction); without, lse[blockIdx.x] = lse.
__global__ void LogSumExpKernel(const float* x, int64_t v, float* lse, float* y) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const float* xi = x + blockIdx.x * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, xi[j]);
  const float mx = BlockReduce(m, fshared, Max());
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += exp(static_cast<double>(xi[j] - mx));
  const float result = mx + static_cast<float>(log(BlockReduce(s, dshared, Sum())));
  if (y == nullptr) {
    if (threadIdx.x == 0) lse[blockIdx.x] = result;
    return;
  }
  float* yi = y + blockIdx.x * v;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) yi[j] = xi[j] - result;
}

// Runs launch(stream, out), which writes one float per row into out [m] (stream-ordered device
// memory), and copies the m values to host_out; returns when they are there.
template <class Launch>
void RowsToHost(const OpContext& ctx, int64_t m, float* host_out, const char* what, Launch launch) {
  if (m == 0) return;
  cudaStream_t stream = StreamOf(ctx);
  float* out = nullptr;
  const size_t bytes = static_cast<size_t>(m) * sizeof(float);
  CheckCuda(cudaMallocAsync(&out, bytes, stream), what);
  launch(stream, out);
  CheckCuda(cudaMemcpyAsync(host_out, out, bytes, cudaMemcpyDeviceToHost, stream), what);
  CheckCuda(cudaFreeAsync(out, stream), what);
  CheckCuda(cudaStreamSynchronize(stream), what);
}

}  // namespace

void LogSumExp(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* host_lse) {
  RowsToHost(ctx, m, host_lse, "log-sum-exp", [&](cudaStream_t stream, float* out) {
    LogSumExpKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, v, out, nullptr);
  });
}

void LogSoftmax(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* y) {
  if (m == 0) return;
  LogSumExpKernel<<<static_cast<unsigned>(m), kThreads, 0, StreamOf(ctx)>>>(x, v, nullptr, y);
}

void KlDivergenceRows(const OpContext& ctx, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* host_out) {
  RowsToHost(ctx, m, host_out, "KL", [&](cudaStream_t stream, float* out) {
    KlKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(p_logits, q_logits, v, out);
  });
}

}  // namespace ripplekv::kernels::cuda
