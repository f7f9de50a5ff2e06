#pragma once
// What `ripplekv eval` and `ripplekv tune` share (docs/EVAL.md): the flags that choose the examples
// (tasks, sizes, corpus, split, seed), the examples they give, RippleKV's budget maps from a
// profile, and the loop that scores every example under every method x budget.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "cli/model_session.h"
#include "eval/compress/control_maps.h"
#include "eval/compress/method.h"
#include "eval/eval_example.h"
#include "eval/eval_runner.h"
#include "eval/haystack.h"
#include "eval/results_table.h"
#include "eval/score_examples.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::cli {

struct ExampleFlags {
  std::string tasks = "fidelity,passkey,kv-retrieval,multi-needle";
  int samples = 8;  // examples per task (LongBench: per dataset)
  // Synthetic tasks: prompt lengths (tokens) and needle depths; every combination is generated.
  std::vector<int64_t> prompt_lens = {1024};
  int64_t context_len = 1024;  // fidelity: context tokens
  int64_t continuation = 64;   // fidelity: teacher-forced tokens
  std::vector<double> depths = {0.5};
  // Label each synthetic example's task with its length and (passkey, kv-retrieval) its depth,
  // "passkey/L1024/d0.1", so that results come per length and depth instead of pooled.
  bool by_depth = false;
  int kv_pairs = 0;                // kv-retrieval: 0 = the body is all pairs
  std::string kv_format = "uuid";  // kv-retrieval keys and values: uuid or short
  int needles = 4;                 // multi-needle
  std::string corpus = std::string(eval::kDefaultEvalCorpus);  // a built-in name or a file
  std::string split = "test";                                  // test or validation
  uint64_t seed = 0;
  bool chat = false;
  std::string longbench;
  std::string templates;
  int64_t max_prompt_tokens = 3500;
};

// Registers --tasks, --samples, --prompt-len, --context-len, --continuation, --depth, --by-depth,
// --kv-pairs, --kv-format, --needles, --corpus, --split, --seed, --chat, --longbench, --templates
// and --max-prompt-tokens on `cmd`, writing into `flags` (which must outlive the parse); `split` is
// the default of --split.
void AddExampleFlags(CLI::App* cmd, ExampleFlags& flags);

// "a,b,c" -> {"a", "b", "c"} (blanks skipped); InvalidArgument naming `flag` for an empty list.
[[nodiscard]] StatusOr<std::vector<std::string>> SplitList(const std::string& text,
                                                           std::string_view flag);
// "256,64,128" -> {64, 128, 256} (sorted, deduplicated); InvalidArgument for a non-positive entry.
[[nodiscard]] StatusOr<std::vector<int>> ParseBudgets(const std::string& text);
// ParseMethod of every name. InvalidArgument for an unknown one.
[[nodiscard]] StatusOr<std::vector<eval::Method>> ParseMethods(const std::string& list);

// The examples of every requested task, in task order. A synthetic example's task is its name,
// "/L<length>" added when several lengths are asked or by_depth is set, and "/d<depth>" (as
// 0.1, 0.5, 1) added for passkey and kv-retrieval when by_depth is set. Examples drawn from the
// corpus are checked to stay inside the region of --split (an Internal error otherwise: never
// report them).
[[nodiscard]] StatusOr<std::vector<eval::EvalExample>> MakeExamples(
    const ExampleFlags& flags, const worker::Tokenizer& tokenizer);

// The smallest per-layer budget a map for `methods`' kMap selections may give: the pickiest
// selection's minimum (SnapKV: its window), at least 1.
int64_t MapMinTokens(const std::vector<eval::Method>& methods,
                     const eval::CompressOptions& compress);

// How RippleKV's maps are made from a profile (method/budget_map.h); the defaults are those of
// `ripplekv budgets`.
struct RippleMapSettings {
  double ratio = 2.0;                  // r, >= 1
  std::map<int, double> tuned_ratios;  // r per average budget (`ripplekv tune`); others: ratio
  double shrink_z = 0.0;               // 0: plain means; else each layer at mean - z x stderr
  method::Normalization normalization = method::Normalization::kMinMax;
  int64_t min_tokens = 1;  // smallest layer budget (each map's is min(min_tokens, B))
  eval::MapControl
      control;  // a control of the map (eval/compress/control_maps.h); none: RippleKV's
};

// RippleKV's budget map per average budget, as `ripplekv budgets` computes it from `profile` with
// `settings` (or settings.control's map of the same sensitivities and options). Errors: those of
// LayerSensitivities and eval::ControlMap.
[[nodiscard]] StatusOr<std::map<int, std::vector<int>>> RippleMaps(
    const method::SensitivityProfile& profile, const std::vector<int>& budgets,
    const RippleMapSettings& settings);

// The budget map per average budget that minimizes the summed response of a response profile
// (method::ComputeBudgetMap on it: method/response_allocation.h), every layer at least
// min(min_tokens, B). FailedPrecondition for a noise profile; the allocation's errors.
[[nodiscard]] StatusOr<std::map<int, std::vector<int>>> ResponseMaps(
    const method::SensitivityProfile& profile, const std::vector<int>& budgets, int64_t min_tokens);

// The profile at `path`, checked to be of the model at `model_path` (InvalidArgument naming both
// hashes otherwise).
[[nodiscard]] StatusOr<method::SensitivityProfile> ReadProfileOfModel(
    const std::string& path, const std::string& model_path);

// eval::ScoreExamples (eval/score_examples.h) over the session's model with a progress bar on
// stderr, then logs the throughput. Errors: the first example's error.
[[nodiscard]] StatusOr<eval::ScoredRun> ScoreExamples(
    const worker::Engine& session, const std::vector<eval::EvalExample>& examples,
    const eval::EvalRunOptions& run);

}  // namespace ripplekv::cli
