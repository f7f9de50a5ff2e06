#pragma once
// The scoring loop of `ripplekv eval` and `ripplekv tune`: every example through EvaluateExample
// (eval_runner.h), in order, with the records and their lines of the records file (records.h).
// Thread-safety: as EvaluateExample's; the Transformer may be shared.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/eval_example.h"
#include "eval/eval_runner.h"
#include "eval/records.h"
#include "worker/engine/transformer.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

struct ScoredRun {
  std::vector<ScoreRecord> records;  // every example's, in example order
  std::string record_lines;          // RecordLine of each record, in the same order
  int64_t prefills = 0;              // prefills run over all examples
};

// EvaluateExample over `examples` with `run`, calling `on_example(n)` (when set) after the n-th
// example is scored; each text answer is logged at debug level. Errors: the first example's.
[[nodiscard]] StatusOr<ScoredRun> ScoreExamples(
    const worker::Transformer& model, const worker::Tokenizer& tokenizer,
    const std::vector<EvalExample>& examples, const EvalRunOptions& run,
    const std::function<void(int64_t)>& on_example = nullptr);

}  // namespace ripplekv::eval
