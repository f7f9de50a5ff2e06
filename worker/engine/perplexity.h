#pragma once
// Perplexity over a token stream, chunked exactly as llama.cpp's perplexity tool does:
//   n_chunks = n_tokens / n_ctx (the tail is dropped); chunk c covers tokens [c*n_ctx, (c+1)*n_ctx),
//   evaluated from an empty cache; when the vocabulary adds BOS, the chunk's first token is replaced
//   by BOS; only the second half is scored: logits at positions n_ctx/2 .. n_ctx-2 predict the next
//   token. ppl = exp(mean NLL over all scored tokens).

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/engine/transformer.h"

namespace ripplekv::worker {

struct PerplexityOptions {
  int n_ctx = 512;           // tokens per chunk
  int max_chunks = 0;        // 0: every full chunk
  int32_t bos_id = -1;       // replaces each chunk's first token when >= 0 (vocab adds BOS)
};

struct PerplexityResult {
  int n_ctx = 0;
  int n_chunks = 0;
  int64_t tokens_scored = 0;
  std::vector<double> chunk_nll_sum;  // per chunk: sum of -log p(next token), nats
  double mean_nll = 0.0;
  double nll_stderr = 0.0;            // standard error of the mean NLL
  double ppl = 0.0;                   // exp(mean_nll)
};

// Called after each chunk with (chunks done, chunks total).
using ChunkProgress = std::function<void(int, int)>;

// InvalidArgument when there are fewer than 2 * n_ctx tokens (llama.cpp's rule) or n_ctx < 4.
StatusOr<PerplexityResult> ComputePerplexity(const Transformer& model,
                                             std::span<const int32_t> tokens,
                                             const PerplexityOptions& options,
                                             const ChunkProgress& progress = nullptr);

}  // namespace ripplekv::worker
