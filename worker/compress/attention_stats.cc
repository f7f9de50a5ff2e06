#include "worker/compress/attention_stats.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "base/strings.h"
#include "kernels/ops/attention_stats.h"

namespace ripplekv::worker {

Status ComputeWindowStats(const kernels::ConstTensorView& q, const kernels::KvCacheView& keys,
                          double scale, const kernels::OpContext& ctx, LayerStats& stats) {
  const int64_t n_heads = q.rank() == 3 ? q.dim(1) : 0;
  std::vector<double> sum(static_cast<size_t>(std::max<int64_t>(n_heads * keys.length, 0)));
  std::vector<double> sumsq(sum.size());
  double entropy = 0.0;
  RETURN_IF_ERROR(kernels::WindowAttentionStats(ctx, q, keys,
                                                scale, kEntropyEpsilon, sum, sumsq, &entropy));
  stats.n_heads = static_cast<int>(n_heads);
  stats.n_kv_heads = keys.n_kv_heads;
  stats.length = keys.length;
  stats.window = static_cast<int>(q.dim(0));
  stats.window_sum = std::move(sum);
  stats.window_sumsq = std::move(sumsq);
  stats.window_entropy = entropy;
  return absl::OkStatus();
}

Status ComputeAccumulatedAttention(const kernels::ConstTensorView& q,
                                   const kernels::KvCacheView& keys, double scale,
                                   const kernels::OpContext& ctx, LayerStats& stats) {
  std::vector<double> accumulated(
      static_cast<size_t>(std::max(keys.n_kv_heads * keys.length, 0)));
  RETURN_IF_ERROR(kernels::AccumulatedAttention(ctx, q, keys,
                                                scale, accumulated));
  stats.n_heads = static_cast<int>(q.dim(1));
  stats.n_kv_heads = keys.n_kv_heads;
  stats.length = keys.length;
  stats.accumulated = std::move(accumulated);
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
