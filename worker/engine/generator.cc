#include "worker/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/ops/communicator.h"

namespace ripplekv::worker {

namespace {
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// The next token from this rank's logits row (host memory). A whole model samples it directly. A
// tensor-parallel shard holds a slice of the vocabulary: greedy decoding takes the largest logit
// over all ranks, then the lowest token holding it; sampling combines the slices into the whole row
// (every rank then draws the same token with the same seed). Host collectives only, so the same
// over MPI and over NCCL groups.
StatusOr<int32_t> NextToken(const Transformer& model, const SamplerOptions& options,
                            Sampler& sampler, const kernels::Tensor& logits) {
  kernels::Communicator* comm = model.op_context().communicator;
  if (comm == nullptr || comm->size() == 1) return sampler.Sample(logits.span());
  const ModelShard& shard = model.model().shard;
  const std::span<const float> row = logits.span();
  if (options.temperature == 0.0f) {
    const auto best = std::max_element(row.begin(), row.end());  // the lowest id among ties
    std::vector<double> largest = {*best};
    RETURN_IF_ERROR(comm->AllReduceMax(largest));
    // The ranks holding the largest logit offer their token, negated: the maximum is the lowest.
    const double token = static_cast<double>(shard.first_vocab + (best - row.begin()));
    std::vector<double> offer = {*best == largest[0] ? -token
                                                     : -std::numeric_limits<double>::infinity()};
    RETURN_IF_ERROR(comm->AllReduceMax(offer));
    return static_cast<int32_t>(-offer[0]);
  }
  std::vector<double> whole(static_cast<size_t>(shard.vocab_size), 0.0);
  std::copy(row.begin(), row.end(), whole.begin() + shard.first_vocab);
  RETURN_IF_ERROR(comm->AllReduceSum(whole));  // each value from one rank, zeros elsewhere: exact
  const std::vector<float> combined(whole.begin(), whole.end());
  return sampler.Sample(combined);
}

}  // namespace

StatusOr<GenerateResult> Generate(const Transformer& model, std::span<const int32_t> prompt,
                                  const GenerateOptions& options,
                                  const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) return absl::InvalidArgumentError("generate: empty prompt");
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError("generate: max_new_tokens must be >= 0");
  }
  const int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  const int limit = model.config().context_length > 0 ? model.config().context_length : 1 << 20;
  if (needed > limit) {
    return absl::ResourceExhaustedError(absl::StrCat("prompt (", prompt.size(), " tokens) + ",
                                                     options.max_new_tokens,
                                                     " new tokens exceed the model's context of ",
                                                     limit));
  }
  KvCache cache = model.NewCache(static_cast<int>(needed));
  Sampler sampler(options.sampler);
  GenerateResult result;

  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(ForwardResult out, model.Forward({.tokens = prompt}, cache));
  result.prefill_seconds = SecondsSince(t0);

  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const kernels::Tensor logits = kernels::OnHost(std::move(out.logits));
    ASSIGN_OR_RETURN(const int32_t next, NextToken(model, options.sampler, sampler, logits));
    if (options.is_stop && options.is_stop(next)) {
      result.stopped = true;
      break;
    }
    result.tokens.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == options.max_new_tokens) break;
    ASSIGN_OR_RETURN(out, model.Forward({.tokens = std::span<const int32_t>(&next, 1)}, cache));
  }
  result.decode_seconds = SecondsSince(t0);
  return result;
}

}  // namespace ripplekv::worker
