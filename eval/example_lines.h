#pragma once
// The examples file (`ripplekv examples`, docs/EVAL.md): every example an evaluation would run,
// one JSON object per line, so that another engine (kvpress under transformers, docs/PYTHON.md)
// runs the very windows and prompts `ripplekv eval` scores and its records pair with eval's by
// example id.
//
// Keys in alphabetical order, no spaces:
//   answers ([string]; text tasks), continuation ([int]; fidelity: the tokens teacher-forced after
//   the prompt), corpus_tokens ([begin, end); examples drawn from a corpus), id, max_new_tokens
//   (int), metric (MetricKindName), prompt ([int]: the whole prefill, BOS first when the
//   vocabulary adds one), region ([begin, end) of the split's corpus region), source, split
//   ("test" or "validation"; split, region and corpus_tokens only for examples drawn from a
//   corpus split), task.
// Thread-safety: pure function.

#include <string>

#include "eval/eval_example.h"
#include "nlohmann/json_fwd.hpp"

namespace ripplekv::eval {

// Adds `split`, `region` and `corpus_tokens` (when the example has them) to `line`: the audit of
// an example's corpus split, written alike in the examples file and the records file.
void AddSplitAudit(const EvalExample& example, nlohmann::json& line);

// The line of `example` in an examples file, with its '\n'. Invalid UTF-8 in strings is replaced.
std::string ExampleLine(const EvalExample& example);

}  // namespace ripplekv::eval
