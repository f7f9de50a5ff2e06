#include "eval/fidelity_task.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/strings.h"
#include "base/rng.h"
#include "kernels/ops/op_context.h"
#include "kernels/ops/softmax.h"
#include "kernels/tensor/tensor.h"

namespace ripplekv::eval {
namespace {

using base::SplitMix64;
using base::StreamSeed;

// Fixed stream id of the fidelity task (synthetic tasks use 1..3).
constexpr uint64_t kFidelityStream = 100;

// log(sum exp(row)) in double, max-subtracted.
double LogSumExp(std::span<const float> row) {
  const float max = *std::max_element(row.begin(), row.end());
  if (std::isinf(max)) return static_cast<double>(max);
  double sum = 0.0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - static_cast<double>(max));
  return static_cast<double>(max) + std::log(sum);
}

}  // namespace

StatusOr<std::vector<EvalExample>> GenerateFidelity(const HaystackCorpus& corpus,
                                                    const worker::Tokenizer& tokenizer,
                                                    const FidelityOptions& options) {
  const int64_t c = options.context_len;
  const int64_t w = options.continuation_len;
  const int64_t n = options.num_examples;
  if (c < 1 || w < 1 || n < 1) {
    return absl::InvalidArgumentError(Cat("fidelity options: context_len (", c,
                                          "), continuation_len (", w, ") and num_examples (", n,
                                          ") must all be >= 1"));
  }
  const int64_t window = c + w;
  const TokenRange region = SplitRegion(corpus.size(), options.split);
  const int64_t stratum = region.size() / n;
  if (stratum < window) {
    // n * window saturates instead of overflowing.
    const int64_t needed = window > INT64_MAX / n ? INT64_MAX : n * window;
    return absl::InvalidArgumentError(
        Cat(corpus.Describe(), " has ", corpus.size(), " tokens; ", n, " windows of ", c, " + ", w,
            " tokens do not fit in its ", EvalSplitName(options.split), " region [", region.begin,
            ", ", region.end, ") of ", region.size(), " tokens (needs a corpus of at least ",
            CorpusTokensForRegion(needed), " tokens)"));
  }
  const std::vector<int64_t>& starts = corpus.paragraph_starts();
  const std::span<const int32_t> tokens = corpus.tokens();
  const std::string_view split_name = EvalSplitName(options.split);
  const uint64_t stream = SplitStream(kFidelityStream, options.split);
  std::vector<EvalExample> out;
  for (int64_t k = 0; k < n; ++k) {
    SplitMix64 rng(StreamSeed(options.seed, stream, static_cast<uint64_t>(k)));
    const int64_t lo = region.begin + k * stratum;
    const int64_t hi = lo + stratum - window;  // last start that keeps the window in the stratum
    const auto first = std::lower_bound(starts.begin(), starts.end(), lo);
    const auto last = std::upper_bound(starts.begin(), starts.end(), hi);
    const int64_t begin =
        first < last
            ? *(first + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(last - first))))
            : rng.Between(lo, hi);
    EvalExample ex;
    ex.id = Cat("fidelity/", corpus.name(), "/", split_name, "@", begin);
    ex.task = "fidelity";
    ex.source = Cat(corpus.name(), "@", begin);
    ex.split = options.split;
    ex.split_region = region;
    ex.corpus_tokens = {begin, begin + window};
    ex.metric = MetricKind::kFidelity;
    ex.max_new_tokens = 0;
    if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) ex.prompt.push_back(tokenizer.bos_id());
    ex.prompt.insert(ex.prompt.end(), tokens.begin() + begin, tokens.begin() + begin + c);
    ex.continuation.assign(tokens.begin() + begin + c, tokens.begin() + begin + window);
    out.push_back(std::move(ex));
  }
  return out;
}

StatusOr<FidelityScores> ScoreFidelity(std::span<const float> full_logits,
                                       std::span<const float> compressed_logits, int64_t vocab_size,
                                       std::span<const int32_t> continuation) {
  const auto w = static_cast<int64_t>(continuation.size());
  if (vocab_size < 1 || w == 0) {
    return absl::InvalidArgumentError(
        Cat("fidelity scores need vocab_size >= 1 and a continuation; got vocab_size ", vocab_size,
            " and ", w, " continuation tokens"));
  }
  // Compared by division so that a huge vocab_size cannot overflow w * vocab_size.
  const bool sizes_match =
      full_logits.size() % static_cast<size_t>(w) == 0 &&
      full_logits.size() / static_cast<size_t>(w) == static_cast<uint64_t>(vocab_size) &&
      compressed_logits.size() == full_logits.size();
  if (!sizes_match) {
    const double expected = static_cast<double>(w) * static_cast<double>(vocab_size);
    return absl::InvalidArgumentError(Cat(
        "fidelity logits: expected ", w, " x ", vocab_size, " = ", expected, " values each; got ",
        full_logits.size(), " (full) and ", compressed_logits.size(), " (compressed)"));
  }
  for (int64_t k = 0; k < w; ++k) {
    if (continuation[k] < 0 || continuation[k] >= vocab_size) {
      return absl::InvalidArgumentError(Cat("fidelity continuation token ", k, " is id ",
                                            continuation[k], ", outside [0, ", vocab_size, ")"));
    }
  }
  // -inf is a token with zero probability; NaN and +inf are broken logits.
  auto broken = [](std::span<const float> v) {
    return std::any_of(v.begin(), v.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
  };
  if (broken(full_logits) || broken(compressed_logits)) {
    return absl::InvalidArgumentError("fidelity logits contain NaN or +inf");
  }
  std::vector<float> kl(static_cast<size_t>(w));
  const kernels::ConstTensorView p(full_logits.data(), {w, vocab_size});
  const kernels::ConstTensorView q(compressed_logits.data(), {w, vocab_size});
  RETURN_IF_ERROR(kernels::KlDivergenceRows(kernels::OpContext{}, p, q, kl));

  FidelityScores out;
  int64_t agree = 0;
  for (int64_t k = 0; k < w; ++k) {
    const auto row = static_cast<size_t>(k * vocab_size);
    const std::span<const float> f = full_logits.subspan(row, static_cast<size_t>(vocab_size));
    const std::span<const float> c =
        compressed_logits.subspan(row, static_cast<size_t>(vocab_size));
    agree += (std::max_element(f.begin(), f.end()) - f.begin()) ==
             (std::max_element(c.begin(), c.end()) - c.begin());
    const int32_t target = continuation[k];
    out.nll_full += LogSumExp(f) - static_cast<double>(f[target]);
    out.nll_compressed += LogSumExp(c) - static_cast<double>(c[target]);
    out.kl += static_cast<double>(kl[k]);
  }
  const double wd = static_cast<double>(w);
  out.kl /= wd;
  out.top1 = static_cast<double>(agree) / wd;
  out.nll_full /= wd;
  out.nll_compressed /= wd;
  return out;
}

}  // namespace ripplekv::eval
