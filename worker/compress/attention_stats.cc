#include "worker/compress/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "kernels/base/strings.h"

namespace ripplekv::worker {

namespace {

// Checks q: [rows, n_heads, head_dim] against the cache view; returns the group size.
StatusOr<int> CheckShapes(const char* op, const kernels::ConstTensorView& q,
                          const kernels::KvCacheView& keys, int64_t rows) {
  if (q.rank() != 3 || q.dim(0) != rows || q.dim(2) != keys.head_dim || keys.n_kv_heads <= 0 ||
      q.dim(1) < keys.n_kv_heads || q.dim(1) % keys.n_kv_heads != 0 || q.data == nullptr) {
    return absl::InvalidArgumentError(Cat(op, ": q ", kernels::ShapeString(q.shape),
                                          " does not fit ", rows, " rows over ", keys.n_kv_heads,
                                          " KV heads of dimension ", keys.head_dim));
  }
  if (keys.length <= 0 || keys.length > keys.capacity) {
    return absl::InvalidArgumentError(
        Cat(op, ": cache length ", keys.length, " outside [1, ", keys.capacity, "]"));
  }
  return static_cast<int>(q.dim(1) / keys.n_kv_heads);
}

// probs[j], j < visible: softmax over the visible keys of scale * q . k_j, in double. Keys are in
// increasing position order, so the keys a query sees are a prefix of the cache.
void AttentionRow(const float* q, const float* k_head, int visible, int d, double scale,
                  std::vector<double>& probs) {
  probs.resize(visible);
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < visible; ++j) {
    const float* k = k_head + static_cast<int64_t>(j) * d;
    double dot = 0.0;
    for (int e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
    probs[j] = dot * scale;
    mx = std::max(mx, probs[j]);
  }
  double z = 0.0;
  for (int j = 0; j < visible; ++j) z += (probs[j] = std::exp(probs[j] - mx));
  for (int j = 0; j < visible; ++j) probs[j] /= z;
}

// Number of keys of `keys` (head 0; all heads hold the same tokens) visible at position qpos.
int Visible(const kernels::KvCacheView& keys, int32_t qpos) {
  return static_cast<int>(std::upper_bound(keys.positions, keys.positions + keys.length, qpos) -
                          keys.positions);
}

}  // namespace

Status ComputeWindowStats(const kernels::ConstTensorView& q, const kernels::KvCacheView& keys,
                          double scale, int num_threads, LayerStats& stats) {
  const int w = q.rank() == 3 ? static_cast<int>(q.dim(0)) : 0;
  if (w <= 0 || w > keys.length) {
    return absl::InvalidArgumentError(Cat("ComputeWindowStats: window of ", w,
                                          " queries for a cache of ", keys.length, " entries"));
  }
  ASSIGN_OR_RETURN(const int group, CheckShapes("ComputeWindowStats", q, keys, w));
  const int n = keys.length;
  const int n_heads = static_cast<int>(q.dim(1));
  const int d = keys.head_dim;
  stats.n_heads = n_heads;
  stats.n_kv_heads = keys.n_kv_heads;
  stats.length = n;
  stats.window = w;
  stats.window_sum.assign(static_cast<size_t>(n_heads) * n, 0.0);
  stats.window_sumsq.assign(static_cast<size_t>(n_heads) * n, 0.0);
  const int prefix_end = n - w;
  std::vector<double> entropy(n_heads, 0.0);

#pragma omp parallel num_threads(std::max(1, num_threads)) if (num_threads > 1)
  {
    std::vector<double> probs;
#pragma omp for schedule(static)
    for (int h = 0; h < n_heads; ++h) {
      const float* k_head = keys.k + static_cast<int64_t>(h / group) * keys.capacity * d;
      double* sum = &stats.window_sum[static_cast<size_t>(h) * n];
      double* sumsq = &stats.window_sumsq[static_cast<size_t>(h) * n];
      for (int r = 0; r < w; ++r) {
        const int32_t qpos = keys.positions[prefix_end + r];
        const int visible = Visible(keys, qpos);
        AttentionRow(q.data + (static_cast<int64_t>(r) * n_heads + h) * d, k_head, visible, d,
                     scale, probs);
        for (int j = 0; j < visible; ++j) {
          const double a = probs[j];
          sum[j] += a;
          sumsq[j] += a * a;
          if (j < prefix_end) entropy[h] -= a * std::log(a + kEntropyEpsilon);
        }
      }
    }
  }
  stats.window_entropy = 0.0;
  for (double e : entropy) stats.window_entropy += e;  // fixed order: thread-count independent
  return absl::OkStatus();
}

Status ComputeAccumulatedAttention(const kernels::ConstTensorView& q,
                                   const kernels::KvCacheView& keys, double scale, int num_threads,
                                   LayerStats& stats) {
  ASSIGN_OR_RETURN(const int group,
                   CheckShapes("ComputeAccumulatedAttention", q, keys, keys.length));
  const int n = keys.length;
  const int n_heads = static_cast<int>(q.dim(1));
  const int d = keys.head_dim;
  stats.n_heads = n_heads;
  stats.n_kv_heads = keys.n_kv_heads;
  stats.length = n;
  // Per query head first, then summed over each group in head order (deterministic).
  std::vector<double> per_head(static_cast<size_t>(n_heads) * n, 0.0);

#pragma omp parallel num_threads(std::max(1, num_threads)) if (num_threads > 1)
  {
    std::vector<double> probs;
#pragma omp for schedule(static)
    for (int h = 0; h < n_heads; ++h) {
      const float* k_head = keys.k + static_cast<int64_t>(h / group) * keys.capacity * d;
      double* acc = &per_head[static_cast<size_t>(h) * n];
      for (int i = 0; i < n; ++i) {
        const int visible = Visible(keys, keys.positions[i]);
        AttentionRow(q.data + (static_cast<int64_t>(i) * n_heads + h) * d, k_head, visible, d,
                     scale, probs);
        for (int j = 0; j < visible; ++j) acc[j] += probs[j];
      }
    }
  }
  stats.accumulated.assign(static_cast<size_t>(keys.n_kv_heads) * n, 0.0);
  for (int h = 0; h < n_heads; ++h) {
    double* dst = &stats.accumulated[static_cast<size_t>(h / group) * n];
    const double* src = &per_head[static_cast<size_t>(h) * n];
    for (int j = 0; j < n; ++j) dst[j] += src[j];
  }
  return absl::OkStatus();
}

Status CheckLayerStats(const LayerStats& s) {
  const auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(Cat("layer statistics (", s.n_heads, " heads, ", s.n_kv_heads,
                                          " KV heads, ", s.length, " tokens, window ", s.window,
                                          "): ", what));
  };
  if (s.n_kv_heads <= 0 || s.n_heads < s.n_kv_heads || s.n_heads % s.n_kv_heads != 0) {
    return bad("query heads must be a positive multiple of KV heads");
  }
  if (s.length < 0 || s.window < 0 || s.window > s.length) return bad("window outside [0, length]");
  const size_t per_head = static_cast<size_t>(s.length);
  if (s.has_window() && (s.window_sum.size() != per_head * s.n_heads ||
                         s.window_sumsq.size() != per_head * s.n_heads)) {
    return bad(
        Cat("window arrays hold ", s.window_sum.size(), " and ", s.window_sumsq.size(), " values"));
  }
  if (s.has_accumulated() && s.accumulated.size() != per_head * s.n_kv_heads) {
    return bad(Cat("accumulated attention holds ", s.accumulated.size(), " values"));
  }
  return absl::OkStatus();
}

double TemporalShift(const LayerStats& stats) {
  const int w = stats.window;
  if (w < 2) return 0.0;
  double total = 0.0;
  for (int h = 0; h < stats.n_heads; ++h) {
    const size_t row = static_cast<size_t>(h) * stats.length;
    for (int j = 0; j < stats.prefix_end(); ++j) {
      const double s = stats.window_sum[row + j];
      const double var = (stats.window_sumsq[row + j] - s * s / w) / (w - 1);
      total += std::max(var, 0.0);  // the one-pass form can round a hair below zero
    }
  }
  return total;
}

}  // namespace ripplekv::worker
