// Attention statistics on the CPU: one softmax row at a time in double, heads split across
// threads; every sum is taken in a fixed order, so results do not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops/cpu/attention_stats_cpu.h"

namespace ripplekv::kernels::cpu {

namespace {

// probs[j], j < visible: softmax over the visible keys of scale * q . k_j, in double. Keys are in
// increasing position order, so the keys a query sees are a prefix of the cache.
void AttentionRow(const float* q, const float* k_head, int64_t visible, int64_t d, double scale,
                  std::vector<double>& probs) {
  probs.resize(static_cast<size_t>(visible));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < visible; ++j) {
    const float* k = k_head + j * d;
    double dot = 0.0;
    for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
    probs[j] = dot * scale;
    mx = std::max(mx, probs[j]);
  }
  double z = 0.0;
  for (int64_t j = 0; j < visible; ++j) z += (probs[j] = std::exp(probs[j] - mx));
  for (int64_t j = 0; j < visible; ++j) probs[j] /= z;
}

// Number of entries of `keys` (head 0; all heads hold the same tokens) visible at position qpos.
int64_t Visible(const KvCacheView& keys, int32_t qpos) {
  return std::upper_bound(keys.positions, keys.positions + keys.length, qpos) - keys.positions;
}

}  // namespace

double WindowAttentionStats(int num_threads, const float* q, int64_t w, int64_t n_heads,
                            const KvCacheView& keys, double scale, double entropy_epsilon,
                            double* sum_out, double* sumsq_out) {
  const int64_t n = keys.length;
  const int64_t d = keys.head_dim;
  const int64_t group = n_heads / keys.n_kv_heads;
  const int64_t prefix_end = n - w;
  std::fill(sum_out, sum_out + n_heads * n, 0.0);
  std::fill(sumsq_out, sumsq_out + n_heads * n, 0.0);
  std::vector<double> entropy(static_cast<size_t>(n_heads), 0.0);

#pragma omp parallel num_threads(std::max(1, num_threads)) if (num_threads > 1)
  {
    std::vector<double> probs;
#pragma omp for schedule(static)
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* k_head = keys.k + (h / group) * keys.capacity * d;
      double* sum = sum_out + h * n;
      double* sumsq = sumsq_out + h * n;
      for (int64_t r = 0; r < w; ++r) {
        const int64_t visible = Visible(keys, keys.positions[prefix_end + r]);
        AttentionRow(q + (r * n_heads + h) * d, k_head, visible, d, scale, probs);
        for (int64_t j = 0; j < visible; ++j) {
          const double a = probs[j];
          sum[j] += a;
          sumsq[j] += a * a;
          if (j < prefix_end) entropy[h] -= a * std::log(a + entropy_epsilon);
        }
      }
    }
  }
  double total = 0.0;
  for (double e : entropy) total += e;  // fixed order: thread-count independent
  return total;
}

void AccumulatedAttention(int num_threads, const float* q, int64_t n_heads, const KvCacheView& keys,
                          double scale, double* accumulated) {
  const int64_t n = keys.length;
  const int64_t d = keys.head_dim;
  const int64_t group = n_heads / keys.n_kv_heads;
  // Per query head first, then summed over each group in head order (deterministic).
  std::vector<double> per_head(static_cast<size_t>(n_heads * n), 0.0);

#pragma omp parallel num_threads(std::max(1, num_threads)) if (num_threads > 1)
  {
    std::vector<double> probs;
#pragma omp for schedule(static)
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* k_head = keys.k + (h / group) * keys.capacity * d;
      double* acc = &per_head[static_cast<size_t>(h * n)];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t visible = Visible(keys, keys.positions[i]);
        AttentionRow(q + (i * n_heads + h) * d, k_head, visible, d, scale, probs);
        for (int64_t j = 0; j < visible; ++j) acc[j] += probs[j];
      }
    }
  }
  std::fill(accumulated, accumulated + keys.n_kv_heads * n, 0.0);
  for (int64_t h = 0; h < n_heads; ++h) {
    double* dst = accumulated + (h / group) * n;
    const double* src = &per_head[static_cast<size_t>(h * n)];
    for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
  }
}

}  // namespace ripplekv::kernels::cpu
