#pragma once
// The records of an evaluation: one ScoreRecord per example, method and budget, the type the
// runner returns, the results table reads and `ripplekv compare` pairs; and the records file
// (`ripplekv eval --records-out`, docs/EVAL.md), its one writer and one reader.
//
// The file is JSONL, one object per record, keys in alphabetical order, no spaces:
//   budget (int >= 0; 0 the full cache), corpus_tokens ([begin, end), when the example took corpus
//   text), example (the example's id), method, prediction (string, text tasks only), region
//   ([begin, end) of the split's corpus region), score (finite number), split ("test" or
//   "validation"; corpus_tokens, region and split only for examples drawn from a corpus split),
//   task.
// The reader needs only method, budget, task, example and score (the rest audits the split and
// the answers; it is not read back).
// Thread-safety: pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"

namespace ripplekv::eval {

// Budget of the uncompressed cache; rendered "full" in markdown.
inline constexpr int kFullCacheBudget = 0;

// One scored example of one method at one budget.
struct ScoreRecord {
  std::string method;  // e.g. "full", "snapkv", "ripplekv"; not empty
  int budget = 0;      // average tokens kept per layer (>= 0); kFullCacheBudget = no compression
  std::string task;    // e.g. "passkey", "narrativeqa", "fidelity/kl"; not empty, not "average"
  std::string example_id;  // EvalExample::id; not empty
  double score = 0.0;      // finite
};

// The largest records file the reader takes.
inline constexpr uint64_t kMaxRecordsFileBytes = uint64_t{1} << 30;

// The line of `record`, scored on `example`, in a records file, with its '\n'. `prediction`:
// the generated answer (null: none, as for fidelity). Invalid UTF-8 in strings is replaced.
std::string RecordLine(const ScoreRecord& record, const EvalExample& example,
                       const std::string* prediction);

// Every record of the records file at `path`, in file order. Blank lines (spaces and tabs only)
// are skipped. Errors: those of reading the file (at most kMaxRecordsFileBytes); InvalidArgument
// naming "file:line" and the field for a line that is not JSON, a missing, mistyped or empty
// field, a budget outside [0, INT_MAX], a score that is not finite, or a record repeated for the
// same (method, budget, task, example) (naming the first line too); InvalidArgument for a file
// with no records.
[[nodiscard]] StatusOr<std::vector<ScoreRecord>> ReadRecordsFile(const std::string& path);

}  // namespace ripplekv::eval
