#include "worker/compress/prefill_observer.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/base/strings.h"
#include "kernels/ops/attention.h"

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
  const int threads = transformer.op_context().num_threads;
  const double stat_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

  // The same attention as Transformer::Forward (append, then CausalAttention with the same float
  // scale), followed by the statistics, which only read q and the cache.
  auto attend = [&](int layer, const kernels::TensorView& q3, kernels::Tensor& k,
                    kernels::Tensor& v, std::span<const int32_t> pos,
                    const kernels::TensorView& out) -> Status {
    RETURN_IF_ERROR(cache.Append(layer, k.span(), v.span(), pos));
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    RETURN_IF_ERROR(
        kernels::CausalAttention(transformer.op_context(), q3, pos, cache.View(layer), scale, out));
    LayerStats& stats = result.layers[layer];
    const kernels::KvCacheView view = cache.View(layer);
    if (options.window_stats) {
      const int64_t row = q3.dim(1) * q3.dim(2);
      const kernels::ConstTensorView q_window(q3.data + (n - window) * row,
                                              {window, q3.dim(1), q3.dim(2)});
      RETURN_IF_ERROR(ComputeWindowStats(q_window, view, stat_scale, threads, stats));
    }
    if (options.accumulated) {
      RETURN_IF_ERROR(ComputeAccumulatedAttention(q3, view, stat_scale, threads, stats));
    }
    if (!options.window_stats && !options.accumulated) {
      stats.n_heads = c.n_heads;
      stats.n_kv_heads = c.n_kv_heads;
      stats.length = n;
    }
    return absl::OkStatus();
  };

  ASSIGN_OR_RETURN(kernels::Tensor x, transformer.Embed(tokens));
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  RETURN_IF_ERROR(transformer.RunLayers(x, {.first = 0, .positions = positions}, attend));

  // The last row, as Forward's LogitRows::kLast path gathers it.
  kernels::Tensor last({1, c.d_model});
  std::memcpy(last.data(), x.data() + static_cast<int64_t>(n - 1) * c.d_model,
              c.d_model * sizeof(float));
  ASSIGN_OR_RETURN(result.logits, transformer.Logits(last));
  return result;
}

}  // namespace ripplekv::worker
