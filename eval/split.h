#pragma once
// Test and validation splits of an evaluation corpus, disjoint by construction.
//
// Parameters chosen on the numbers they are reported with are overfit to them. So every example
// generated from corpus text (fidelity windows, synthetic haystacks) belongs to a split:
//
//   regions  The corpus tokens [0, N) are cut in two at h = floor(N / 2): the test region is
//            [0, h), the validation region [h, N). A split's fidelity windows and haystack prose
//            are drawn only from its region. Halves, not a smaller validation share: 40 fidelity
//            windows of the default 1024 + 64 tokens need 43,520 tokens in each region, and
//            tom-sawyer has ~104k SmolLM2 tokens (~52k a half).
//   seeds    The example streams of the validation split are SplitMix64 streams with bit 32 of
//            the stream id set (SplitStream); test stream ids are below 2^32 and are those the
//            generators used before splits existed. So needle values, depths and keys differ
//            between the splits for the same --seed.
//   check    Every example records its split, its split's region and the corpus tokens it took
//            (EvalExample); CheckSplitConfinement recomputes the regions from the corpus size and
//            verifies that no example takes a token outside its own region, in particular none
//            of the other split's region. `ripplekv eval` runs it on every set it generates.
//
// docs/EVAL.md ("Splits") documents the rule. Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/status.h"
#include "eval/eval_example.h"

namespace ripplekv::eval {

// "test", "validation".
std::string_view EvalSplitName(EvalSplit split);
// Inverse of EvalSplitName; nullopt for another name.
std::optional<EvalSplit> ParseEvalSplit(std::string_view name);

// The region of a corpus of `corpus_tokens` (>= 0) tokens that `split` draws from: test [0, h),
// validation [h, corpus_tokens), h = corpus_tokens / 2. The two regions are disjoint and cover
// the corpus.
TokenRange SplitRegion(int64_t corpus_tokens, EvalSplit split);

// The fewest corpus tokens for which the regions of both splits hold `region_tokens` (>= 0)
// tokens: 2 * region_tokens (INT64_MAX when that overflows). For error messages ("needs a corpus
// of at least ... tokens").
int64_t CorpusTokensForRegion(int64_t region_tokens);

// The stream id (the `a` of base::StreamSeed) of a generator's stream `stream`
// (< 2^32) in `split`: `stream` for kTest, `stream` with bit 32 set for kValidation.
uint64_t SplitStream(uint64_t stream, EvalSplit split);

// Verifies the split contract of `examples` generated from one corpus of `corpus_tokens` tokens.
// Examples without a split (LongBench) are skipped. For every other example: its recorded
// split_region equals SplitRegion(corpus_tokens, split), its corpus_tokens lie inside that
// region and intersect the other split's region nowhere. Errors: Internal naming the first
// offending example, its split, its range and the region (a generator broke the contract;
// numbers computed from such a set must not be reported).
[[nodiscard]] Status CheckSplitConfinement(std::span<const EvalExample> examples,
                                           int64_t corpus_tokens);

}  // namespace ripplekv::eval
