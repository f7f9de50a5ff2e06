#include "worker/engine/perplexity.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/ops/softmax.h"

namespace ripplekv::worker {

StatusOr<PerplexityResult> ComputePerplexity(const Transformer& model,
                                             std::span<const int32_t> tokens,
                                             const PerplexityOptions& options,
                                             const ChunkProgress& progress) {
  const int n_ctx = options.n_ctx;
  if (n_ctx < 4) return absl::InvalidArgumentError(absl::StrCat("ctx must be >= 4, got ", n_ctx));
  if (static_cast<int64_t>(tokens.size()) < 2LL * n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("need at least ", 2 * n_ctx,
                                                   " tokens for a context of ", n_ctx, ", the text has ",
                                                   tokens.size()));
  }
  int n_chunks = static_cast<int>(tokens.size() / n_ctx);
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);

  PerplexityResult result;
  result.n_ctx = n_ctx;
  result.n_chunks = n_chunks;
  KvCache cache = model.NewCache(n_ctx);
  // On the host; for a tensor-parallel shard with its communicator (the logits hold this rank's
  // vocabulary slice: the log-sum-exp and the targets' logits are combined over ranks).
  const kernels::OpContext host{.num_threads = model.op_context().num_threads,
                                .communicator = model.op_context().communicator};
  const ModelShard& shard = model.model().shard;
  const int first = n_ctx / 2;
  const int vocab = model.config().vocab_size;
  double sum = 0.0, sum_sq = 0.0;
  for (int c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<int64_t>(c) * n_ctx,
                               tokens.begin() + static_cast<int64_t>(c + 1) * n_ctx);
    if (options.bos_id >= 0) chunk[0] = options.bos_id;
    cache.Clear();
    ASSIGN_OR_RETURN(ForwardResult out,
                     model.Forward({.tokens = chunk, .logits = LogitRows::kAll, .first_logit_row = first},
                                   cache));
    const int n_scored = n_ctx - 1 - first;
    std::vector<float> lse(n_scored);
    // Logit rows start at position `first`; the last row (position n_ctx-1) is not scored.
    // Scored on the host: each row needs its target's logit there too.
    const kernels::Tensor logits = kernels::OnHost(std::move(out.logits));
    kernels::ConstTensorView rows(logits.data(), {n_scored, vocab});
    RETURN_IF_ERROR(kernels::LogSumExp(host, rows, lse));
    // The target is the original next token (a BOS substitution only touches position 0); its
    // logit is on the rank whose vocabulary slice holds it.
    std::vector<double> target_logits(n_scored, 0.0);
    for (int i = 0; i < n_scored; ++i) {
      const int32_t target =
          tokens[static_cast<int64_t>(c) * n_ctx + first + i + 1] - shard.first_vocab;
      if (target >= 0 && target < vocab) {
        target_logits[i] = rows.data[static_cast<int64_t>(i) * vocab + target];
      }
    }
    if (host.communicator != nullptr) {
      RETURN_IF_ERROR(host.communicator->AllReduceSum(target_logits));
    }
    double chunk_sum = 0.0;
    for (int i = 0; i < n_scored; ++i) {
      const double nll = lse[i] - static_cast<float>(target_logits[i]);  // in float, as always
      chunk_sum += nll;
      sum_sq += nll * nll;
    }
    sum += chunk_sum;
    result.chunk_nll_sum.push_back(chunk_sum);
    result.tokens_scored += n_scored;
    if (progress) progress(c + 1, n_chunks);
  }
  const double count = static_cast<double>(result.tokens_scored);
  result.mean_nll = sum / count;
  const double var = std::max(0.0, sum_sq / count - result.mean_nll * result.mean_nll);
  result.nll_stderr = count > 1 ? std::sqrt(var / (count - 1)) : 0.0;
  result.ppl = std::exp(result.mean_nll);
  return result;
}

}  // namespace ripplekv::worker
