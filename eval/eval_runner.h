#pragma once
// Runs one evaluation example under every method × budget from a single prefill (issue: "one
// prefill per example serves every method and budget"; compression happens after prefill).
//
// Per example:
//   1. PrefillObserved over example.prompt into a cache with room for the decode, recording the
//      statistics every requested method needs (worker/compress/prefill_observer.h).
//   2. Full cache: the reference. Text tasks: greedy answer; fidelity: the continuation's logits.
//   3. For each method (other than "full") and average budget B: a copy of the prefilled cache is
//      compressed (PlanBudgets + CompressCache), then decoded at the true positions n, n+1, ...
//      Text tasks: greedy decoding until an end-of-generation token or max_new_tokens, the first
//      token being the argmax of the prefill's last logits (the same for every method, as in
//      SnapKV-style serving: the prompt is processed with the full cache); scored by ScoreAnswer.
//      Fidelity: the continuation is teacher-forced in one pass; ScoreFidelity against the full
//      cache gives KL, top-1 agreement and ΔNLL (three records).
// Every record of the full cache has budget kFullCacheBudget. Results do not depend on the
// thread count (the engine's guarantee).
//
// Thread-safety: stateless; the Transformer may be shared.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/compress/method.h"
#include "eval/eval_example.h"
#include "eval/results_table.h"
#include "worker/engine/transformer.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {

// A method evaluated under settings of its own, from the same prefill as every other method
// (`ripplekv tune` compares ratios and CAKE temperatures this way; `eval --tuned` gives each budget
// its tuned setting). Records carry `label` as their method.
struct MethodVariant {
  // The records' method name. A label may repeat for other budgets (one setting per budget), but
  // each (label, budget) is run once among methods and variants.
  std::string label;
  Method method;      // not "full"
  // Its own CAKE temperatures, pooling, sinks, beta; the window must equal
  // EvalRunOptions::compress.window (the prefill records one window). nullopt: the run's.
  std::optional<CompressOptions> compress;
  // Its own budget maps (kMap methods), by average budget; empty: the run's budget_maps.
  std::map<int, std::vector<int>> budget_maps;
  std::vector<int> budgets;  // the averages it runs at; empty: the run's budgets
};

struct EvalRunOptions {
  std::vector<Method> methods;  // "full" may be among them; it is evaluated once per example
  std::vector<int> budgets;     // average budgets B (tokens per layer and KV head), each >= 1
  CompressOptions compress;     // window, pooling, sinks, PyramidKV beta, CAKE temperatures
  // Per-layer budget maps of the kMap methods ("ripple", "map"), by average budget: each has
  // n_layers entries summing to n_layers * B. Required for every B when such a method is asked.
  std::map<int, std::vector<int>> budget_maps;
  // false: prefill again for every method × budget (the baseline the benchmark compares with).
  bool shared_prefill = true;
  std::vector<MethodVariant> variants;  // evaluated after `methods`, in order
};

struct ExampleRun {
  std::vector<ScoreRecord> records;
  // The generated text per (method, budget) for text tasks, for --json output and debugging.
  std::map<std::pair<std::string, int>, std::string> predictions;
  // Tokens each layer kept after compression (per KV head), per compressed (method, budget):
  // what the method actually spent, e.g. a budget map's per-layer budgets.
  std::map<std::pair<std::string, int>, std::vector<int>> kept;
  int prefills = 0;  // prefills run for this example
};

// Errors: InvalidArgument (no method or variant, a budget < 1, a missing budget map, a (label,
// budget) given twice, a variant window other than the run's, an empty prompt,
// a prompt longer than the model's context), and those of the engine and the compression
// library.
[[nodiscard]] StatusOr<ExampleRun> EvaluateExample(const worker::Transformer& model,
                                                   const worker::Tokenizer& tokenizer,
                                                   const EvalExample& example,
                                                   const EvalRunOptions& options);

}  // namespace ripplekv::eval
