// Row-wise KL(softmax(p) || softmax(q)), log-sum-exp and log-softmax on the device, with the CPU's
// formulas and precision (kernels/ops/cpu/softmax_cpu.cc): one block per row, float
// maxima, then the exponentials and the vocabulary sums in double (block reductions: another order
// than the CPU's sequential sums, so equal within rounding, which the gpu tests bound), the KL
// clamped at 0. Per-row results (KL, log-sum-exp) are copied to host memory: calibration and the
// perplexity evaluation read them there.

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>

#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/softmax.h"

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

// Runs launch(stream, out), which writes `count` values into out (stream-ordered device memory)
// and returns its LaunchResult, and copies them to host_out; returns when they are there, with
// the launcher's code (host_out is then unspecified when it is not 0).
template <class T, class Launch>
int RowsToHost(const OpContext& ctx, int64_t count, T* host_out, const char* what, Launch launch) {
  if (count == 0) return 0;
  cudaStream_t stream = StreamOf(ctx);
  T* out = nullptr;
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  if (int e = MallocAsync(reinterpret_cast<void**>(&out), bytes, stream, what); e != 0) return e;
  int e = launch(stream, out);
  if (e == 0) CheckCuda(cudaMemcpyAsync(host_out, out, bytes, cudaMemcpyDeviceToHost, stream), what);
  CheckCuda(cudaFreeAsync(out, stream), what);
  if (e != 0) return e;
  CheckCuda(cudaStreamSynchronize(stream), what);
  return LaunchResult(ctx, what);
}

// Host doubles on the device (stream-ordered; the caller frees them with cudaFreeAsync): 0, or a
// launcher's error code with *device null.
int ToDevice(cudaStream_t stream, const double* host, int64_t count, double** device) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(double);
  if (int e = MallocAsync(reinterpret_cast<void**>(device), bytes, stream, "maxima to the device");
      e != 0) {
    *device = nullptr;
    return e;
  }
  CheckCuda(cudaMemcpyAsync(*device, host, bytes, cudaMemcpyHostToDevice, stream),
            "maxima to the device");
  return 0;
}

// The pieces of a vocabulary slice, one block per row (kernels/ops/cpu/softmax_cpu.cc's steps): with
// maxima == nullptr, the float maxima of p (and q) as doubles: out[k * i + 0 (1)], k = 1 or 2;
// else the sums over the slice against the whole rows' maxima: (Sp, Sq, cross) per row when q is
// given, sum exp(p - max) when not.
__global__ void VocabSliceKernel(const float* p_logits, const float* q_logits, int64_t v,
                                 const double* maxima, double* out) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const int64_t i = blockIdx.x;
  const float* p = p_logits + i * v;
  const float* q = q_logits != nullptr ? q_logits + i * v : nullptr;
  if (maxima == nullptr) {
    float mp = -FLT_MAX, mq = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
      mp = fmaxf(mp, p[j]);
      if (q != nullptr) mq = fmaxf(mq, q[j]);
    }
    const float max_p = BlockReduce(mp, fshared, Max());
    const float max_q = q != nullptr ? BlockReduce(mq, fshared, Max()) : 0.0f;
    if (threadIdx.x == 0) {
      if (q != nullptr) {
        out[2 * i] = max_p;
        out[2 * i + 1] = max_q;
      } else {
        out[i] = max_p;
      }
    }
    return;
  }
  const double max_p = q != nullptr ? maxima[2 * i] : maxima[i];
  const double max_q = q != nullptr ? maxima[2 * i + 1] : 0.0;
  double sp = 0.0, sq = 0.0, cross = 0.0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const double a = static_cast<double>(p[j]) - max_p;
    const double ea = exp(a);
    sp += ea;
    if (q != nullptr) {
      const double b = static_cast<double>(q[j]) - max_q;
      sq += exp(b);
      if (ea > 0.0) cross += ea * (a - b);
    }
  }
  const double sum_p = BlockReduce(sp, dshared, Sum());
  if (q == nullptr) {
    if (threadIdx.x == 0) out[i] = sum_p;
    return;
  }
  const double sum_q = BlockReduce(sq, dshared, Sum());
  const double sum_cross = BlockReduce(cross, dshared, Sum());
  if (threadIdx.x == 0) {
    out[3 * i] = sum_p;
    out[3 * i + 1] = sum_q;
    out[3 * i + 2] = sum_cross;
  }
}

// VocabSliceKernel over m rows into host_out (count values), with host maxima when given.
int VocabSlice(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
               const double* host_maxima, int64_t count, double* host_out, const char* what) {
  return RowsToHost(ctx, count, host_out, what, [&](cudaStream_t stream, double* out) {
    const int64_t k = q != nullptr ? 2 : 1;
    double* maxima = nullptr;
    if (host_maxima != nullptr) {
      if (int e = ToDevice(stream, host_maxima, k * m, &maxima); e != 0) return e;
    }
    VocabSliceKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(p, q, v, maxima, out);
    const int e = LaunchResult(ctx, what);
    if (maxima != nullptr) CheckCuda(cudaFreeAsync(maxima, stream), what);
    return e;
  });
}

}  // namespace

int LogSumExp(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* host_lse) {
  return RowsToHost(ctx, m, host_lse, "LogSumExp", [&](cudaStream_t stream, float* out) {
    LogSumExpKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, v, out, nullptr);
    return LaunchResult(ctx, "LogSumExp");
  });
}

int LogSoftmax(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* y) {
  if (m == 0) return 0;
  LogSumExpKernel<<<static_cast<unsigned>(m), kThreads, 0, StreamOf(ctx)>>>(x, v, nullptr, y);
  return LaunchResult(ctx, "LogSoftmax");
}

int KlDivergenceRows(const OpContext& ctx, const float* p_logits, const float* q_logits, int64_t m,
                     int64_t v, float* host_out) {
  return RowsToHost(ctx, m, host_out, "KlDivergence", [&](cudaStream_t stream, float* out) {
    KlKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(p_logits, q_logits, v, out);
    return LaunchResult(ctx, "KlDivergence");
  });
}

int KlRowMaxima(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                double* host_maxima) {
  return VocabSlice(ctx, p, q, m, v, nullptr, 2 * m, host_maxima, "KL maxima");
}

int KlPartialSums(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                  const double* host_maxima, double* host_sums) {
  return VocabSlice(ctx, p, q, m, v, host_maxima, 3 * m, host_sums, "KL partial sums");
}

int RowMaxima(const OpContext& ctx, const float* x, int64_t m, int64_t v, double* host_maxima) {
  return VocabSlice(ctx, x, nullptr, m, v, nullptr, m, host_maxima, "row maxima");
}

int ExpSums(const OpContext& ctx, const float* x, int64_t m, int64_t v,
            const double* host_maxima, double* host_sums) {
  return VocabSlice(ctx, x, nullptr, m, v, host_maxima, m, host_sums, "exp sums");
}

}  // namespace ripplekv::kernels::cuda
