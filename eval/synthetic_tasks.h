#pragma once
// Synthetic retrieval tasks in the style of RULER (Hsieh et al., 2024, NVIDIA/RULER), built on
// prose from a HaystackCorpus. Every example is scored by RULER's string_match_all (the expected
// strings found in the postprocessed greedy answer, case-insensitive; metrics.h).
//
//   passkey       One needle " The pass key is 71432. Remember it. 71432 is the pass key." in
//                 the prose at `depth`; question "What is the pass key?"; answer "71432".
//   multi-needle  `num_needles` needles " The special magic number for <key> is: <value>." with
//                 distinct adjective-noun keys ("quiet-harbor") and distinct 7-digit values, at
//                 `needle_depths`; `num_queries` keys are asked, the answers are their values.
//   kv-retrieval  Key-value pairs as a JSON object, one pair a line, keys and values random
//                 UUIDs (8-4-4-4-12 hex) or 8-hex-digit strings. kv_pairs == 0: the whole body is
//                 pairs, as many as fit, and the queried pair sits at `depth` among them;
//                 kv_pairs > 0: exactly that many pairs as one JSON block in the prose at
//                 `depth`, the queried pair at `depth` within the block. Answer: its value.
//
// Prompt layout: prompt_format.h (head, body, tail; chat markup when `chat`). The prompt of
// passkey and multi-needle is exactly `prompt_len` tokens (the prose fills what the frame and
// needles leave); kv-retrieval with kv_pairs == 0 is at most `prompt_len` and short by less than
// one pair's tokens plus the longest question's difference. The prose starts at a paragraph
// start inside the region of the requested split (split.h: test the first half of the corpus
// tokens, validation the second); needles go to the nearest sentence boundary (haystack.h).
// The haystacks of one call never overlap when the region holds them all (region.size() /
// num_examples >= the haystack's prose tokens): example k takes its prose from stratum k of
// num_examples equal strata of the region (HaystackStratum, as fidelity windows do). When they
// do not fit, each example draws its prose from the whole region and haystacks may overlap.
// Random draws (start offset, keys, values, queried keys) come from SplitMix64 seeded by (seed,
// SplitStream(task, split), example index), so the two splits draw different values for the same
// seed; a drawn value that occurs in the prose (or a key that contains another key) is drawn
// again, so every needle occurs exactly once. The same corpus, tokenizer and options give the
// same examples on every platform.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"
#include "eval/haystack.h"
#include "eval/split.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

enum class SyntheticTask { kPasskey, kKvRetrieval, kMultiNeedle };

// "passkey", "kv-retrieval", "multi-needle" (EvalExample::task).
std::string_view SyntheticTaskName(SyntheticTask task);
std::optional<SyntheticTask> ParseSyntheticTask(std::string_view name);

enum class KvFormat {
  kUuid,   // "3f2b9c1e-8a7d-4e21-b5c3-0d9e8f7a6b5c"
  kShort,  // "3f2b9c1e"
};

struct SyntheticOptions {
  int64_t prompt_len = 1024;  // target prompt tokens, everything included (BOS, chat markup)
  int num_examples = 8;       // >= 1
  uint64_t seed = 0;
  bool chat = false;          // wrap in the model's chat template (ChatML only)
  bool answer_prefix = true;  // end the prompt with the start of the answer (RULER style)
  // 0: the task's default (passkey 16, kv-retrieval 48 for UUIDs / 16 for short, multi-needle
  // 24 per queried key).
  int max_new_tokens = 0;

  double depth = 0.5;  // passkey, kv-retrieval: where the needle / queried pair goes, in [0, 1]

  int passkey_digits = 5;  // passkey: digits of the pass key, 1..18 (no leading zero)

  int num_needles = 4;                // multi-needle: needles (distinct keys), 1..64
  int num_queries = 1;                // multi-needle: keys asked, 1..num_needles
  std::vector<double> needle_depths;  // multi-needle: one per needle in [0, 1]; empty: (k+0.5)/n

  int kv_pairs = 0;  // kv-retrieval: 0 = fill the body with pairs; > 0 = a block of that many
  KvFormat kv_format = KvFormat::kUuid;

  EvalSplit split = EvalSplit::kTest;  // the corpus region and seed domain (split.h)
};

// InvalidArgument naming the field when an option is out of range.
[[nodiscard]] Status ValidateSyntheticOptions(SyntheticTask task, const SyntheticOptions& options);

// `num_examples` examples of `task`. Example ids read
// "<task>/<corpus>/<split>/L<prompt_len>/<d0.50 | n4q1 | ...>/s<seed>/<index>"; every example
// records its split, the split's region and the corpus tokens of its prose (EvalExample). Errors:
// bad options; a prompt_len too small for the frame and needles (or, with kv_pairs == 0, for two
// pairs); a haystack longer than the split's region (naming the corpus size needed);
// BuildPromptFrame's chat template errors.
[[nodiscard]] StatusOr<std::vector<EvalExample>> GenerateSynthetic(
    SyntheticTask task, const HaystackCorpus& corpus, const worker::Tokenizer& tokenizer,
    const SyntheticOptions& options);

}  // namespace ripplekv::eval
