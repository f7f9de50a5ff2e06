#pragma once
// The fidelity task: how far a compressed cache moves the model's next-token distribution on
// natural long text. An example is a window of `context_len` corpus tokens (the prefill whose
// cache is compressed) followed by `continuation_len` tokens that are teacher-forced. With the
// full cache and with a compressed one, the model gives logits for every continuation token;
// ScoreFidelity compares them:
//   kl           mean over positions of KL(softmax(full) || softmax(compressed)), nats
//   top1         fraction of positions where both argmaxes agree
//   delta_nll    mean NLL of the continuation under the compressed cache minus under the full
//                cache, nats (> 0: the compressed cache predicts the real text worse)
// The table reports them as tasks "fidelity/kl", "fidelity/top1" and "fidelity/delta_nll" (not
// part of the average across tasks; results_table.h).
//
// Windows come from the corpus (default kDefaultEvalCorpus, "tom-sawyer", so that evaluation text
// is disjoint from every built-in calibration set), inside the region of the
// requested split (split.h: test the first half of the tokens, validation the second). The
// region is cut into num_examples equal strata and window k starts at a paragraph start inside
// stratum k chosen with SplitMix64(StreamSeed(seed, SplitStream(100, split), k)) (any token of
// the stratum when none leaves room), so windows never overlap and cover the whole region.
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"
#include "eval/haystack.h"
#include "eval/split.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

inline constexpr std::string_view kFidelityKlTask = "fidelity/kl";
inline constexpr std::string_view kFidelityTop1Task = "fidelity/top1";
inline constexpr std::string_view kFidelityDeltaNllTask = "fidelity/delta_nll";

// Whether a lower score of `task` is better: the divergences fidelity/kl and fidelity/delta_nll.
// Every other task (accuracies, top-1 agreement) is higher-is-better.
inline bool LowerIsBetter(std::string_view task) {
  return task == kFidelityKlTask || task == kFidelityDeltaNllTask;
}

struct FidelityOptions {
  int64_t context_len = 1024;     // C: corpus tokens in the prefill (BOS not counted), >= 1
  int64_t continuation_len = 64;  // W: tokens teacher-forced and scored, >= 1
  int num_examples = 8;           // windows, >= 1
  uint64_t seed = 0;
  EvalSplit split = EvalSplit::kTest;  // the corpus region and seed domain (split.h)
};

// Examples with task "fidelity", metric kFidelity, prompt = [BOS when the vocabulary adds one] +
// C corpus tokens, continuation = the next W corpus tokens, id
// "fidelity/<corpus>/<split>@<offset>", source "<corpus>@<offset>", max_new_tokens 0, and the
// split, its region and the window's corpus tokens [offset, offset + C + W) recorded. Errors:
// InvalidArgument for bad options or when num_examples windows of C + W tokens do not fit in the
// split's region (naming the corpus, its size, the region and the corpus size needed).
[[nodiscard]] StatusOr<std::vector<EvalExample>> GenerateFidelity(
    const HaystackCorpus& corpus, const worker::Tokenizer& tokenizer,
    const FidelityOptions& options);

struct FidelityScores {
  double kl = 0.0;              // nats, >= 0
  double top1 = 0.0;            // in [0, 1]
  double nll_full = 0.0;        // nats per token
  double nll_compressed = 0.0;  // nats per token
  double delta_nll() const { return nll_compressed - nll_full; }
};

// full_logits, compressed_logits: [W, vocab_size] row-major fp32, row k scoring
// continuation[k] (the logits after the prefill and continuation[0..k-1]). Argmax ties go to the
// lowest id. Errors: InvalidArgument when the sizes disagree, vocab_size < 1, W == 0, a
// continuation id is outside [0, vocab_size) or a logit is NaN or +inf (-inf is a token of zero
// probability).
[[nodiscard]] StatusOr<FidelityScores> ScoreFidelity(std::span<const float> full_logits,
                                                     std::span<const float> compressed_logits,
                                                     int64_t vocab_size,
                                                     std::span<const int32_t> continuation);

}  // namespace ripplekv::eval
