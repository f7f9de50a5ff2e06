#pragma once
// The budget flags, shared by `ripplekv budgets` (a map computed locally or by a scheduler) and
// `ripplekv map create` (a frozen map version on a scheduler), so both take the same spellings
// with the same defaults and check them the same way (docs/BUDGETS.md).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "method/budget_map.h"
#include "ripplekv/v1/calibration.pb.h"

namespace ripplekv::cli {

struct BudgetFlags {
  int64_t avg_budget = 0;    // B, average tokens per layer (total = L * B); 0: not given
  int64_t total_budget = 0;  // T, tokens over all layers, instead of B; 0: not given
  double ratio = 2.0;        // r >= 1: the most sensitive layer gets r times the least
  int64_t min_budget = 1;    // smallest budget of any layer, tokens
  int64_t max_budget = 0;    // largest budget of any layer, tokens; 0: unbounded
  int64_t context_len = 0;   // context length the budgets are for, tokens; 0: unknown
  std::string normalization = "minmax";  // minmax, rank or log-minmax
  double shrink_z = 0.0;                 // z of the lower confidence bound; 0: plain means
  bool per_head = false;  // budgets per KV head (a per-head response profile's head curves)
  // The token selector the map is meant for and its parameters: snapkv (--window), h2o or
  // streaming (--sinks) set the floor that selector needs (SelectionFloorFromFlags); empty: none.
  std::string selection;
  int64_t window = 0;  // SnapKV's observation window, tokens; 0: kDefaultSnapKvWindow
  int64_t sinks = 0;   // StreamingLLM's sink tokens; 0: kDefaultStreamingSinks
  // Set by AddBudgetFlags(): whether the command offers --total-budget. Decides what a missing
  // budget is called in BudgetOptionsFromFlags()'s error.
  bool total_budget_offered = false;
  // Set by AddBudgetFlags(): whether a --selection other than the known selectors is recorded as
  // given (`map create`) rather than refused (`budgets`).
  bool other_selections_recorded = false;
};

// The selectors' defaults when --window / --sinks are not given: RippleKV's own (the evaluation's
// and the response calibration's, method::kResponseWindow and kResponseSinks). kvpress 0.5.x's
// SnapKVPress uses window_size 64 and StreamingLLMPress n_sink 4: pass --window 64 for kvpress.
inline constexpr int64_t kDefaultSnapKvWindow = 32;
inline constexpr int64_t kDefaultStreamingSinks = 4;

// What --selection asks of a map: the smallest budget the selector keeps whatever it is given
// (SnapKV its observation window, StreamingLLM its sinks, H2O one token), and the parameters that
// fix it, recorded in a frozen map's selection intent ({"window": "64"}).
struct SelectionFloor {
  std::string method;  // "snapkv", "h2o" or "streaming"
  int64_t min_tokens = 1;
  std::map<std::string, std::string> params;
};

// The floor of --selection, --window and --sinks: nullopt without --selection, or for another
// name when other_selections_recorded. Errors (InvalidArgument naming the flag): an unknown
// selector where names are not recorded; --window without --selection snapkv, --sinks without
// --selection streaming; a value < 1.
[[nodiscard]] StatusOr<std::optional<SelectionFloor>> SelectionFloorFromFlags(
    const BudgetFlags& flags);

// Which of the budget flags a command takes, beyond the ones every such command takes.
struct BudgetFlagSet {
  bool total_budget = false;               // --total-budget as an alternative to --avg-budget
  bool avg_budget_required = false;        // the parse fails without --avg-budget
  bool other_selections_recorded = false;  // --selection NAME of an unknown selector is recorded
};

// Registers --avg-budget, --ratio, --min-budget, --max-budget, --normalization, --shrink-z,
// --per-head, --context-len, --selection, --window and --sinks (and --total-budget when `set`
// says so) on `cmd`, writing into `flags`, which must outlive the parse.
void AddBudgetFlags(CLI::App* cmd, BudgetFlags& flags, BudgetFlagSet set);

// The flags as library options (--context-len becomes max_context), every flag checked:
// exactly one of --avg-budget and --total-budget, neither negative, --max-budget and
// --context-len not negative, --normalization one of the names ParseNormalization() takes;
// --per-head sets per_head (whether the profile has head curves is ComputeBudgetMap()'s to check);
// --selection raises min_tokens to its floor (SelectionFloorFromFlags), saying so on stderr when
// that is above --min-budget.
// Errors: InvalidArgument naming the flag ("--max-budget: must be >= 0 (0: none)"). The ratio
// and the bounds against each other are ComputeBudgetMap()'s (and the scheduler's) to check.
[[nodiscard]] StatusOr<method::BudgetOptions> BudgetOptionsFromFlags(const BudgetFlags& flags);

// The flags' bounds alone, for a command that chooses the budget itself (`ripplekv budgets
// --max-kl` and `--frontier`, the flag named `chooser`): every check of BudgetOptionsFromFlags()
// but the budget's, and neither --avg-budget nor --total-budget given (InvalidArgument
// "--avg-budget: not with --max-kl"). average_tokens is 0 and total_tokens unset.
[[nodiscard]] StatusOr<method::BudgetOptions> BoundOptionsFromFlags(const BudgetFlags& flags,
                                                                    std::string_view chooser);

// A map's per-layer tokens under some options (computed locally, or asked of a scheduler).
using LayerTokensFn =
    std::function<StatusOr<std::vector<int64_t>>(const method::BudgetOptions& options)>;

// --context-len as a cap, for a map that failed under `options` (whose max_context is set): the
// map without the context check (`layer_tokens`) gives some layer more than the context C. Then
// the options with max_tokens = C, so those layers keep the context and their excess is spread
// over the others (water-filling, as `eval` fits a map to its context), and a line on stderr says
// how many layers were capped. nullopt when no layer exceeds C (the failure has another cause) or
// max_context is unset. Errors: InvalidArgument naming --avg-budget / --total-budget when L * C
// tokens cannot hold the total; those of `layer_tokens`.
[[nodiscard]] StatusOr<std::optional<method::BudgetOptions>> CapAtContext(
    const method::BudgetOptions& options, const LayerTokensFn& layer_tokens);

}  // namespace ripplekv::cli
