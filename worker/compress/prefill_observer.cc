#include "worker/compress/prefill_observer.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"

namespace ripplekv::worker {

StatusOr<ObservedPrefill> PrefillObserved(const Transformer& transformer,
                                          std::span<const int32_t> tokens,
                                          const ObserverOptions& options, KvCache& cache) {
  const ModelConfig& c = transformer.config();
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return absl::InvalidArgumentError("PrefillObserved: no tokens");
  if (options.window < 1) {
    return absl::InvalidArgumentError(
        Cat("PrefillObserved: window must be >= 1, got ", options.window));
  }
  for (int l = 0; l < cache.n_layers(); ++l) {
    if (cache.length(l) != 0) {
      return absl::FailedPreconditionError(Cat("PrefillObserved: the cache must be empty; layer ",
                                               l, " holds ", cache.length(l), " tokens"));
    }
  }
  if (cache.n_layers() != c.n_layers || cache.n_kv_heads() != c.n_kv_heads ||
      cache.head_dim() != c.head_dim) {
    return absl::InvalidArgumentError("PrefillObserved: the cache was made for another model");
  }
  if (cache.capacity() < n) {
    return absl::ResourceExhaustedError(
        Cat("PrefillObserved: cache holds ", cache.capacity(), " tokens, the prompt has ", n));
  }

  ObservedPrefill result;
  result.layers.resize(c.n_layers);
  const int window = std::min(options.window, n);
  const kernels::OpContext& ctx = transformer.op_context();
  const double stat_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const LayerObserver observe = [&](int layer, const kernels::ConstTensorView& q,
                                            const kernels::KvCacheView& view) -> Status {
    LayerStats& stats = result.layers[layer];
    if (options.window_stats) {
      const int64_t row = q.dim(1) * q.dim(2);
      const kernels::ConstTensorView q_window(q.data + (n - window) * row,
                                              {window, q.dim(1), q.dim(2)}, q.device);
      RETURN_IF_ERROR(ComputeWindowStats(q_window, view, stat_scale, ctx, stats));
    }
    if (options.accumulated) {
      RETURN_IF_ERROR(ComputeAccumulatedAttention(q, view, stat_scale, ctx, stats));
    }
    if (!options.window_stats && !options.accumulated) {
      stats.n_heads = c.n_heads;
      stats.n_kv_heads = c.n_kv_heads;
      stats.length = n;
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(
      ForwardResult forward,
      transformer.Forward(
          {.tokens = tokens, .logits = LogitRows::kLast, .observer = &observe}, cache));
  result.logits = std::move(forward.logits);
  return result;
}

}  // namespace ripplekv::worker
