// y = x * W^T on the CPU. OpenBLAS runs single-threaded; we split the output columns into
// fixed-width slices and run the slices on our threads. The slice width does not depend on the
// thread count, so every output element is computed by the same BLAS call whatever the number of
// threads: results are bit-identical across thread counts (OpenBLAS's own threading is not).

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/dequant/gemv.h"
#include "kernels/ops/cpu/blas_threads.h"
#include "kernels/ops/cpu/linear_cpu.h"

namespace ripplekv::kernels::cpu {

namespace {
constexpr int64_t kColumnSlice = 128;  // output features per work item

// y[i, j] += bias[j] for the m rows of y ([m, n]) and the columns [n0, n0 + nc) of one slice.
void AddBias(const float* bias, float* y, int64_t m, int64_t n, int64_t n0, int64_t nc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n0; j < n0 + nc; ++j) y[i * n + j] += bias[j];
  }
}
}  // namespace

void Linear(int num_threads, const float* x, int64_t x_stride, const float* w, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate) {
  UseSingleThreadedBlas();
  const float beta = accumulate ? 1.0f : 0.0f;
  const int64_t n_slices = (n + kColumnSlice - 1) / kColumnSlice;
#pragma omp parallel for num_threads(num_threads) schedule(dynamic, 1) if (n_slices > 1)
  for (int64_t s = 0; s < n_slices; ++s) {
    const int64_t n0 = s * kColumnSlice;
    const int64_t nc = std::min(kColumnSlice, n - n0);
    if (m == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, nc, k, 1.0f, w + n0 * k, k, x, 1, beta, y + n0, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nc, k, 1.0f, x, x_stride, w + n0 * k,
                  k, beta, y + n0, n);
    }
    if (bias != nullptr) AddBias(bias, y, m, n, n0, nc);
  }
}

void LinearStored(int num_threads, const float* x, int64_t x_stride, const Weight& w,
                  const float* bias, float* y, int64_t m, bool accumulate) {
  UseSingleThreadedBlas();
  const int64_t n = w.rows();
  const int64_t k = w.cols();
  if (m == 1) {
    // One row (decode): the fused dequantize-dot GEMV reads the stored blocks only, its rows split
    // evenly across the threads (not in 128-row slices, which leave a thread idle on 192 or 576
    // rows); each y[j] is still one thread's fixed-order dot. Its sum order differs from sgemv's,
    // within the bound stated in kernels/dequant/gemv.h.
    thread_local std::vector<float> product;  // W x when it is added to y
    float* out = y;
    if (accumulate) {
      product.resize(static_cast<size_t>(n));
      out = product.data();
    }
    const Status st = DequantGemv({.num_threads = num_threads}, w.type(), w.RowBytes(0, n), n, k,
                                  {x, static_cast<size_t>(k)}, {out, static_cast<size_t>(n)});
    RIPPLEKV_CHECK(st.ok());  // shapes were checked by the front end
    if (accumulate) {
      for (int64_t j = 0; j < n; ++j) y[j] += out[j];
    }
    if (bias != nullptr) AddBias(bias, y, 1, n, 0, n);
    return;
  }
  const float beta = accumulate ? 1.0f : 0.0f;
  const int64_t n_slices = (n + kColumnSlice - 1) / kColumnSlice;
#pragma omp parallel num_threads(num_threads) if (n_slices > 1)
  {
    // This thread's fp32 copy of one slice of W: [kColumnSlice, k]; kept between calls (OpenMP
    // threads persist), so calls do not allocate.
    thread_local std::vector<float> slice;
    const size_t needed = static_cast<size_t>(std::min(kColumnSlice, n) * k);
    if (slice.size() < needed) slice.resize(needed);
#pragma omp for schedule(dynamic, 1)
    for (int64_t s = 0; s < n_slices; ++s) {
      const int64_t n0 = s * kColumnSlice;
      const int64_t nc = std::min(kColumnSlice, n - n0);
      w.ExpandRows(n0, nc, slice.data());
      // The same call as Linear() with w + n0 * k replaced by the expanded slice.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nc, k, 1.0f, x, x_stride,
                  slice.data(), k, beta, y + n0, n);
      if (bias != nullptr) AddBias(bias, y, m, n, n0, nc);
    }
  }
}

}  // namespace ripplekv::kernels::cpu
