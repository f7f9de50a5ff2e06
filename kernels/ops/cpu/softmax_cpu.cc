// Row-wise log-sum-exp and KL(softmax(p) || softmax(q)) on the CPU, the KL in three steps so a
// vocabulary split over ranks can combine them (maxima, then partial sums, then the KL). Parallel
// over rows; each row is reduced in a fixed order, so results do not depend on the thread count.
//
// With a_j = p_j - max(p), b_j = q_j - max(q), Sp = sum exp(a), Sq = sum exp(b):
//   log P_j - log Q_j = (a_j - b_j) - log(Sp / Sq),  so  KL = sum_j exp(a_j) (a_j - b_j) / Sp
//   - log(Sp / Sq).
// Everything after reading the fp32 logits is in double. a_j and b_j are exact (a difference of two
// floats fits a double), and when p ~= q the two terms are both small, so the cancellation between
// them costs accuracy relative to the perturbation, not to the logits' magnitude: small KLs (the
// calibration regime) keep their relative precision.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops/cpu/softmax_cpu.h"

namespace ripplekv::kernels::cpu {

void LogSumExp(int num_threads, const float* x, int64_t m, int64_t v, float* lse) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (m > 1)
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * v;
    float mx = xi[0];
    for (int64_t j = 1; j < v; ++j) mx = std::max(mx, xi[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(xi[j] - mx));
    lse[i] = mx + static_cast<float>(std::log(sum));
  }
}

void KlRowMaxima(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                 int64_t v, double* maxima) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (m > 1)
  for (int64_t i = 0; i < m; ++i) {
    const float* p = p_logits + i * v;
    const float* q = q_logits + i * v;
    float max_p = p[0], max_q = q[0];
    for (int64_t j = 1; j < v; ++j) {
      max_p = std::max(max_p, p[j]);
      max_q = std::max(max_q, q[j]);
    }
    maxima[2 * i] = max_p;
    maxima[2 * i + 1] = max_q;
  }
}

void KlPartialSums(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                   int64_t v, const double* maxima, double* sums) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (m > 1)
  for (int64_t i = 0; i < m; ++i) {
    const float* p = p_logits + i * v;
    const float* q = q_logits + i * v;
    const double max_p = maxima[2 * i], max_q = maxima[2 * i + 1];
    double sum_p = 0.0, sum_q = 0.0, cross = 0.0;
    for (int64_t j = 0; j < v; ++j) {
      const double a = static_cast<double>(p[j]) - max_p;
      const double b = static_cast<double>(q[j]) - max_q;
      const double ea = std::exp(a);
      sum_p += ea;
      sum_q += std::exp(b);
      if (ea > 0.0) cross += ea * (a - b);  // P_j = 0 contributes 0, even where Q_j = 0
    }
    sums[3 * i] = sum_p;
    sums[3 * i + 1] = sum_q;
    sums[3 * i + 2] = cross;
  }
}

float KlFromSums(const double* sums) {
  const double kl = sums[2] / sums[0] - std::log(sums[0] / sums[1]);
  return static_cast<float>(std::max(kl, 0.0));
}

void KlDivergenceRows(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* out) {
  std::vector<double> maxima(static_cast<size_t>(2 * m)), sums(static_cast<size_t>(3 * m));
  KlRowMaxima(num_threads, p_logits, q_logits, m, v, maxima.data());
  KlPartialSums(num_threads, p_logits, q_logits, m, v, maxima.data(), sums.data());
  for (int64_t i = 0; i < m; ++i) out[i] = KlFromSums(sums.data() + 3 * i);
}

}  // namespace ripplekv::kernels::cpu
