#include "worker/engine/generator.h"

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {

namespace {
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    const int32_t next = sampler.Sample(logits.span());
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
