#pragma once
// LongBench (Bai et al., ACL 2024; THUDM/LongBench) in its JSONL format: reading records,
// prompt templates, truncation and the per-dataset metric.
//
// Record (one JSON object a line): "input" (string: the question, may be empty), "context"
// (string), "answers" (non-empty array of strings), "all_classes" (null or array of strings;
// required for the classification datasets trec and lsht), "dataset" (string), "length"
// (optional non-negative integer: LongBench's word count of the context), "_id" (optional
// string). Other keys are ignored. Blank lines are ignored; a UTF-8 BOM on the first line is
// dropped; a CR before the LF is dropped.
//
// Prompt: the dataset's template (user file, else kDefaultLongBenchTemplate) with {context} and
// {input} replaced, tokenized without special tokens; when longer than max_prompt_tokens, its
// first and last max_prompt_tokens / 2 tokens are kept (LongBench pred.py: "truncate in the
// middle, since the left and right side may contain crucial instructions"; LongBench decodes and
// re-tokenizes the two halves, we keep the token ids). Then the chat template (prompt_format.h)
// when LongBenchOptions::chat, except for trec, triviaqa, samsum, lsht, lcc and repobench-p,
// which LongBench runs without it. BOS first when the vocabulary adds one.
//
// Metric per dataset (LongBench eval.py dataset2metric) and max_new_tokens (dataset2maxlen):
//   qa_f1 (narrativeqa 128, qasper 128, multifieldqa_en 64, hotpotqa 32, 2wikimqa 32, musique 32,
//   triviaqa 32), qa_f1_zh (multifieldqa_zh 64), rouge_l (gov_report 512, qmsum 512,
//   multi_news 512, samsum 128), rouge_l_zh (dureader 128, vcsum 512), classification (trec 64,
//   lsht 64), retrieval (passage_retrieval_en 32), retrieval_zh (passage_retrieval_zh 32), count
//   (passage_count 32), code_sim (lcc 64, repobench-p 64). A LongBench-E name ("hotpotqa_e") is
//   looked up without its "_e". Other datasets need a template entry naming the metric.
// First-line postprocessing (EvalExample::first_line_only): trec, triviaqa, samsum, lsht.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

struct LongBenchRecord {
  std::string id;                        // "_id"; empty when absent
  std::string dataset;                   // "dataset"
  std::string input;                     // "input"
  std::string context;                   // "context"
  std::vector<std::string> answers;      // "answers"; at least one
  std::vector<std::string> all_classes;  // "all_classes"; empty when null or absent
  int64_t length = -1;                   // "length"; -1 when absent
  std::string source;                    // "file:line"
};

struct LongBenchReadOptions {
  int64_t max_records = 0;  // stop after this many records; 0 = no limit
};

// Records of JSONL `bytes`; `source_name` stands for the file in sources and errors.
// Errors (InvalidArgument, all naming "file:line"): invalid JSON (with the byte offset in the
// line), a line that is not an object, a missing or mistyped field (naming it, and the element
// index inside arrays), empty "answers", "all_classes" null or absent for trec/lsht, a negative
// "length", a line over 64 MiB; no record at all.
[[nodiscard]] StatusOr<std::vector<LongBenchRecord>> ParseLongBenchJsonl(
    std::string_view bytes, std::string_view source_name, const LongBenchReadOptions& options = {});

// ParseLongBenchJsonl over a file, read whole. Further errors: those of ReadFileBounded
// (docs/ERRORS.md): NotFound (no such file), InvalidArgument (not a regular file),
// ResourceExhausted (over 1 GiB), errno-mapped codes when it cannot be opened, stat'ed or read.
[[nodiscard]] StatusOr<std::vector<LongBenchRecord>> ReadLongBenchJsonl(
    const std::string& path, const LongBenchReadOptions& options = {});

// What we know about one of LongBench's 21 datasets.
struct LongBenchDataset {
  std::string_view name;
  MetricKind metric;
  int max_new_tokens;
  bool first_line_only;  // trec, triviaqa, samsum, lsht
  bool chat;             // false for trec, triviaqa, samsum, lsht, lcc, repobench-p
};
// The dataset named `name` or `name` without a trailing "_e"; nullptr when unknown.
const LongBenchDataset* FindLongBenchDataset(std::string_view name);

// Used for datasets without a template: a generic reading-comprehension prompt. For results
// comparable with published LongBench numbers, pass LongBench's own config/dataset2prompt.json as
// the template file (its format is accepted as is).
inline constexpr std::string_view kDefaultLongBenchTemplate =
    "Read the following text and answer the question.\n\n{context}\n\nQuestion: {input}\nAnswer:";

struct LongBenchTemplate {
  std::string text;                   // with {context} / {input}; "{{" and "}}" are braces
  std::optional<int> max_new_tokens;  // else the dataset's (64 for unknown datasets)
  std::optional<MetricKind> metric;   // else the dataset's; required for unknown datasets
  std::optional<bool> chat;           // else the dataset's (true for unknown datasets)
  std::optional<bool> first_line;     // else the dataset's (false for unknown datasets)
};

// Dataset name -> template; "*" applies to datasets not listed.
using LongBenchTemplates = std::map<std::string, LongBenchTemplate, std::less<>>;

// A JSON object mapping dataset names to either a template string (LongBench's
// dataset2prompt.json) or an object {"template": "...", "max_new_tokens": N, "metric": "qa_f1",
// "chat": bool, "first_line": bool} ("template" required; other keys are errors).
// Errors (InvalidArgument naming `source_name`, the dataset and the field): invalid JSON, wrong
// types, max_new_tokens outside 1..65536, an unknown metric name, a placeholder other than
// {context} / {input} or an unbalanced brace (with its byte offset in the template).
[[nodiscard]] StatusOr<LongBenchTemplates> ParseLongBenchTemplates(std::string_view json,
                                                                   std::string_view source_name);
// ParseLongBenchTemplates over a file (at most 16 MiB). Errors as ReadLongBenchJsonl.
[[nodiscard]] StatusOr<LongBenchTemplates> ReadLongBenchTemplates(const std::string& path);

// Python str.format of `text` with the record's "context" and "input". Errors: InvalidArgument
// for other placeholders and unbalanced braces, naming the byte offset.
[[nodiscard]] StatusOr<std::string> ExpandLongBenchTemplate(std::string_view text,
                                                            const LongBenchRecord& record);

struct LongBenchOptions {
  // Truncation limit of the templated prompt, tokens (LongBench uses 3500 for models with a 4k
  // context; chat markup comes on top). 0: no truncation.
  int64_t max_prompt_tokens = 3500;
  bool chat = false;        // chat template (ChatML) for the datasets LongBench runs as chat
  int max_per_dataset = 0;  // the first N records of each dataset, in file order; 0 = all
};

// One example per record (see the top of this file): task = the record's dataset, id = "_id"
// (else the source), answers / all_classes from the record. Errors: InvalidArgument naming the
// record's source when its dataset is unknown and has no template with a metric, or a template
// is malformed; BuildPromptFrame's chat template errors; bad options.
[[nodiscard]] StatusOr<std::vector<EvalExample>> MakeLongBenchExamples(
    std::span<const LongBenchRecord> records, const LongBenchTemplates& templates,
    const worker::Tokenizer& tokenizer, const LongBenchOptions& options);

}  // namespace ripplekv::eval
