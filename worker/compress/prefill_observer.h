#pragma once
// A prefill that records, per layer, the attention statistics the compression policies need
// (worker/compress/attention_stats.h). It is Transformer::Forward with a LayerObserver, so the
// cache and the last row's logits are Forward's; the statistics are computed from each layer's
// queries and its freshly appended keys, so no n x n matrix is stored.
//
// Thread-safety: stateless; concurrent calls need distinct caches.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/compress/attention_stats.h"
#include "kernels/tensor/tensor.h"
#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

struct ObserverOptions {
  int window = 32;           // w: observation window, the last w prompt queries (tokens)
  bool window_stats = true;  // SnapKV / CAKE statistics (O(w * n) per head)
  bool accumulated = false;  // H2O accumulated attention: another O(n^2) pass per head
};

struct ObservedPrefill {
  kernels::Tensor logits;          // [1, vocab_size]: logits of the last prompt token
  std::vector<LayerStats> layers;  // [n_layers]
};

// Runs the prompt `tokens` at positions 0..n-1 through every layer into `cache`, which must be
// empty (FailedPrecondition otherwise) and hold n tokens (ResourceExhausted otherwise).
// InvalidArgument for no tokens, a token outside the vocabulary or window < 1. The window is
// min(window, n). Statistics use transformer.op_context().num_threads threads.
[[nodiscard]] StatusOr<ObservedPrefill> PrefillObserved(const Transformer& transformer,
                                                        std::span<const int32_t> tokens,
                                                        const ObserverOptions& options,
                                                        KvCache& cache);

}  // namespace ripplekv::worker
