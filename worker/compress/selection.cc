#include "worker/compress/selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/strings.h"

namespace ripplekv::worker {

namespace {

std::vector<int32_t> Range(int begin, int end) {
  std::vector<int32_t> out(std::max(0, end - begin));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

// The same entries for every KV head.
std::vector<std::vector<int32_t>> Replicate(const std::vector<int32_t>& keep, int n_kv_heads) {
  return std::vector<std::vector<int32_t>>(n_kv_heads, keep);
}

// Sorted union of the top `k` of `prefix_scores` (indices < prefix_end) and [prefix_end, n).
std::vector<int32_t> TopPlusTail(std::span<const double> prefix_scores, int k, int prefix_end,
                                 int n) {
  std::vector<int32_t> keep = TopK(prefix_scores, k);
  for (int j = prefix_end; j < n; ++j) keep.push_back(j);
  return keep;
}

Status BelowMinimum(SelectionKind kind, int budget, int minimum, std::string_view what) {
  return absl::InvalidArgumentError(Cat(SelectionName(kind), ": budget ", budget,
                                        " is below the minimum ", minimum, " (", what, ")"));
}

// Selections that keep the observation window plus the top `budget - window` prefix entries by
// `score(kv_head)`.
template <typename ScoreFn>
StatusOr<std::vector<std::vector<int32_t>>> WindowPlusTop(SelectionKind kind,
                                                          const LayerStats& stats, int budget,
                                                          ScoreFn score) {
  if (!stats.has_window()) {
    return absl::FailedPreconditionError(
        Cat(SelectionName(kind), ": the prefill did not record window statistics"));
  }
  const int n = stats.length;
  if (budget >= n) return Replicate(Range(0, n), stats.n_kv_heads);
  if (budget < stats.window) {
    return BelowMinimum(kind, budget, stats.window,
                        Cat("the observation window of ", stats.window, " tokens"));
  }
  std::vector<std::vector<int32_t>> keep(stats.n_kv_heads);
  for (int h = 0; h < stats.n_kv_heads; ++h) {
    keep[h] = TopPlusTail(score(h), budget - stats.window, stats.prefix_end(), n);
  }
  return keep;
}

}  // namespace

std::string_view SelectionName(SelectionKind kind) {
  switch (kind) {
    case SelectionKind::kSnapKv:
      return "snapkv";
    case SelectionKind::kStreaming:
      return "streaming";
    case SelectionKind::kH2o:
      return "h2o";
    case SelectionKind::kCake:
      return "cake";
    case SelectionKind::kFull:
      return "full";
  }
  return "?";
}

Status ValidateSelectionOptions(const SelectionOptions& o) {
  if (o.pool_kernel < 1 || o.pool_kernel % 2 == 0) {
    return absl::InvalidArgumentError(Cat("pool_kernel must be odd and >= 1, got ", o.pool_kernel));
  }
  if (o.cake_pool_kernel < 1 || o.cake_pool_kernel % 2 == 0) {
    return absl::InvalidArgumentError(
        Cat("cake_pool_kernel must be odd and >= 1, got ", o.cake_pool_kernel));
  }
  if (o.sinks < 0) return absl::InvalidArgumentError(Cat("sinks must be >= 0, got ", o.sinks));
  if (!(o.heavy_ratio >= 0.0 && o.heavy_ratio <= 1.0)) {
    return absl::InvalidArgumentError(Cat("heavy_ratio must be in [0, 1], got ", o.heavy_ratio));
  }
  if (o.recent_tokens < 0) {
    return absl::InvalidArgumentError(Cat("recent_tokens must be >= 0, got ", o.recent_tokens));
  }
  if (!(o.cake_gamma >= 0.0 && std::isfinite(o.cake_gamma))) {
    return absl::InvalidArgumentError(
        Cat("cake_gamma must be finite and >= 0, got ", o.cake_gamma));
  }
  return absl::OkStatus();
}

int MinBudget(SelectionKind kind, const SelectionOptions& options, int window, int length) {
  switch (kind) {
    case SelectionKind::kSnapKv:
    case SelectionKind::kCake:
      return std::min(window, length);
    case SelectionKind::kStreaming:
      return std::min(options.sinks, length);
    case SelectionKind::kH2o:
      return std::min(1, length);
    case SelectionKind::kFull:
      return length;
  }
  return length;
}

std::vector<double> Pool1d(std::span<const double> x, PoolKind kind, int kernel) {
  const int n = static_cast<int>(x.size());
  const int half = kernel / 2;
  std::vector<double> out(n);
  for (int j = 0; j < n; ++j) {
    const int lo = std::max(0, j - half), hi = std::min(n - 1, j + half);
    if (kind == PoolKind::kMax) {
      out[j] = *std::max_element(x.begin() + lo, x.begin() + hi + 1);
    } else {
      double s = 0.0;
      for (int i = lo; i <= hi; ++i) s += x[i];
      out[j] = s / kernel;
    }
  }
  return out;
}

std::vector<int32_t> TopK(std::span<const double> scores, int k) {
  std::vector<int32_t> idx = Range(0, static_cast<int>(scores.size()));
  k = std::clamp(k, 0, static_cast<int>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<double> SnapKvScores(const LayerStats& stats, int kv_head,
                                 const SelectionOptions& options) {
  const int group = stats.n_heads / stats.n_kv_heads;
  const int p = stats.prefix_end();
  std::vector<double> votes(p, 0.0);
  for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const double* sum = &stats.window_sum[static_cast<size_t>(h) * stats.length];
    for (int j = 0; j < p; ++j) votes[j] += sum[j];
  }
  return Pool1d(votes, options.pool, options.pool_kernel);
}

std::vector<double> CakeScores(const LayerStats& stats, int kv_head,
                               const SelectionOptions& options) {
  const int group = stats.n_heads / stats.n_kv_heads;
  const int p = stats.prefix_end();
  const int w = stats.window;
  std::vector<double> score(p, 0.0), head(p);
  for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const size_t row = static_cast<size_t>(h) * stats.length;
    for (int j = 0; j < p; ++j) {
      const double s = stats.window_sum[row + j];
      const double var =
          w < 2 ? 0.0 : std::max(0.0, (stats.window_sumsq[row + j] - s * s / w) / (w - 1));
      head[j] = s / w + options.cake_gamma * var;
    }
    const std::vector<double> pooled = Pool1d(head, PoolKind::kAvg, options.cake_pool_kernel);
    for (int j = 0; j < p; ++j) score[j] += pooled[j];
  }
  for (double& s : score) s /= group;
  return score;
}

StatusOr<std::vector<std::vector<int32_t>>> SelectTokens(SelectionKind kind,
                                                         const LayerStats& stats, int budget,
                                                         const SelectionOptions& options) {
  RETURN_IF_ERROR(ValidateSelectionOptions(options));
  RETURN_IF_ERROR(CheckLayerStats(stats));
  if (budget < 0) return absl::InvalidArgumentError(Cat("negative budget ", budget));
  const int n = stats.length;
  switch (kind) {
    case SelectionKind::kFull:
      return Replicate(Range(0, n), stats.n_kv_heads);
    case SelectionKind::kSnapKv:
      return WindowPlusTop(kind, stats, budget,
                           [&](int h) { return SnapKvScores(stats, h, options); });
    case SelectionKind::kCake:
      return WindowPlusTop(kind, stats, budget,
                           [&](int h) { return CakeScores(stats, h, options); });
    case SelectionKind::kStreaming: {
      if (budget >= n) return Replicate(Range(0, n), stats.n_kv_heads);
      if (budget < options.sinks) {
        return BelowMinimum(kind, budget, options.sinks, Cat(options.sinks, " sink tokens"));
      }
      std::vector<int32_t> keep = Range(0, options.sinks);
      for (int32_t j : Range(n - (budget - options.sinks), n)) keep.push_back(j);
      return Replicate(keep, stats.n_kv_heads);
    }
    case SelectionKind::kH2o: {
      if (!stats.has_accumulated()) {
        return absl::FailedPreconditionError(
            "h2o: the prefill did not record accumulated attention");
      }
      if (budget >= n) return Replicate(Range(0, n), stats.n_kv_heads);
      if (budget < 1) return BelowMinimum(kind, budget, 1, "a layer keeps at least one token");
      const int recent = options.recent_tokens > 0
                             ? std::min(options.recent_tokens, budget)
                             : budget - static_cast<int>(std::floor(budget * options.heavy_ratio));
      const int heavy = budget - recent;
      std::vector<std::vector<int32_t>> keep(stats.n_kv_heads);
      for (int h = 0; h < stats.n_kv_heads; ++h) {
        const std::span<const double> acc(&stats.accumulated[static_cast<size_t>(h) * n],
                                          static_cast<size_t>(n - recent));
        keep[h] = TopPlusTail(acc, heavy, n - recent, n);
      }
      return keep;
    }
  }
  return absl::InvalidArgumentError("SelectTokens: unknown selection");
}

}  // namespace ripplekv::worker
