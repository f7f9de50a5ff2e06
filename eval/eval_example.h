#pragma once
// One evaluation example: the whole prefill a model runs, and what its answer is scored against.
// Produced by the generators (synthetic_tasks.h, fidelity_task.h, longbench.h); consumed by the
// loop that runs the model with each compressed cache (not in this library) and by ScoreAnswer
// (metrics.h). docs/EVAL.md describes every task.
//
// An EvalExample is plain data: copyable, no invariants beyond those stated per field.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ripplekv::eval {

// How a generated answer is scored (metrics.h has one function per kind and the sources).
enum class MetricKind {
  kStringMatchAll,   // RULER string_match_all: fraction of references found in the answer
  kStringMatchPart,  // RULER string_match_part: 1 when any reference is found in the answer
  kQaF1,             // LongBench qa_f1_score (SQuAD normalisation, token F1)
  kQaF1Zh,           // LongBench qa_f1_zh_score, character-level segmentation (not jieba)
  kRougeL,           // LongBench rouge_score: ROUGE-L F of the `rouge` package
  kRougeLZh,         // LongBench rouge_zh_score, character-level segmentation (not jieba)
  kClassification,   // LongBench classification_score (over EvalExample::all_classes)
  kRetrieval,        // LongBench retrieval_score ("Paragraph N")
  kRetrievalZh,      // LongBench retrieval_zh_score ("段落N")
  kCount,            // LongBench count_score
  kCodeSim,          // LongBench code_sim_score (fuzzywuzzy ratio of the first code line)
  kFidelity,         // not scored from text: KL / top-1 / NLL from logits (fidelity_task.h)
};

// Stable lower-case name ("string_match_all", "qa_f1", "rouge_l", "classification", ...), as
// written in template files and JSON output.
std::string_view MetricKindName(MetricKind kind);
// Inverse of MetricKindName; nullopt for an unknown name.
std::optional<MetricKind> ParseMetricKind(std::string_view name);

// The part of a corpus an example is drawn from (split.h has the rule and the check). `ripplekv
// eval` reports kTest; parameters are chosen on kValidation, which shares no corpus token and no
// random stream with kTest.
enum class EvalSplit { kTest, kValidation };

// Corpus tokens [begin, end); empty when end <= begin.
struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  // Both ranges are non-empty and share a token.
  bool Intersects(const TokenRange& other) const {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
  // `inner` is empty or lies inside this range.
  bool Contains(const TokenRange& inner) const {
    return inner.empty() || (begin <= inner.begin && inner.end <= end);
  }
  friend bool operator==(const TokenRange&, const TokenRange&) = default;
};

struct EvalExample {
  // Unique within its task and stable for the same inputs, e.g.
  // "passkey/tom-sawyer/test/L1024/d0.50/s42/3", "fidelity/tom-sawyer/validation@51234", or
  // LongBench's "_id".
  std::string id;
  // Task name as it appears in result tables: "passkey", "kv-retrieval", "multi-needle",
  // "fidelity", or the LongBench dataset name ("narrativeqa", "hotpotqa", ...).
  std::string task;
  // Where the text came from: "corpus-name@token_offset" or "file:line".
  std::string source;

  // The whole prefill, exactly as the model must see it: BOS first when the vocabulary adds
  // one, the chat markup when the example was built for a chat prompt, the context, the
  // question and any answer prefix. Generation starts right after the last token.
  std::vector<int32_t> prompt;

  // Expected answers (text scoring only). Synthetic tasks: the references RULER's string_match
  // compares against; LongBench: the record's "answers" (the score is the max over them).
  std::vector<std::string> answers;
  // LongBench "all_classes" (classification datasets only; empty otherwise).
  std::vector<std::string> all_classes;
  MetricKind metric = MetricKind::kStringMatchAll;
  // Keep only the first line of the prediction before scoring (LongBench does so for trec,
  // triviaqa, samsum and lsht).
  bool first_line_only = false;
  // Greedy decoding stops after this many new tokens (or at an end-of-generation token).
  int max_new_tokens = 32;

  // Fidelity only (metric == kFidelity): the tokens teacher-forced after `prompt`. The prompt is
  // then the context window (BOS first when the vocabulary adds one).
  std::vector<int32_t> continuation;

  // Synthetic tasks only: where each needle (or the queried key-value pair) sits. Offsets are
  // token indices into `prompt` where the needle's first token is; depths are the needle's
  // position within the haystack as a fraction in [0, 1] (0 = before the first haystack token,
  // 1 = after the last).
  std::vector<int64_t> needle_offsets;
  std::vector<double> needle_depths;

  // Examples generated from corpus text (fidelity and synthetic tasks; nullopt for LongBench):
  // the split the example belongs to, the region of the corpus that split draws from, and the
  // corpus tokens the example's text was taken from (inside the region; empty when the body is
  // generated, as in kv-retrieval with kv_pairs == 0). CheckSplitConfinement (split.h) verifies
  // them against the corpus size.
  std::optional<EvalSplit> split;
  TokenRange split_region;
  TokenRange corpus_tokens;
};

}  // namespace ripplekv::eval
