#pragma once
// The budget flags, shared by `ripplekv budgets` (a map computed locally or by a scheduler) and
// `ripplekv map create` (a frozen map version on a scheduler), so both take the same spellings
// with the same defaults and check them the same way (docs/BUDGETS.md).

#include <cstdint>
#include <string>
#include <string_view>

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
  // Set by AddBudgetFlags(): whether the command offers --total-budget. Decides what a missing
  // budget is called in BudgetOptionsFromFlags()'s error.
  bool total_budget_offered = false;
};

// Which of the budget flags a command takes, beyond the ones every such command takes.
struct BudgetFlagSet {
  bool total_budget = false;         // --total-budget as an alternative to --avg-budget
  bool avg_budget_required = false;  // the parse fails without --avg-budget
};

// Registers --avg-budget, --ratio, --min-budget, --max-budget, --normalization, --shrink-z,
// --per-head and --context-len (and --total-budget when `set` says so) on `cmd`, writing into
// `flags`, which must outlive the parse.
void AddBudgetFlags(CLI::App* cmd, BudgetFlags& flags, BudgetFlagSet set);

// The flags as library options (--context-len becomes max_context), every flag checked:
// exactly one of --avg-budget and --total-budget, neither negative, --max-budget and
// --context-len not negative, --normalization one of the names ParseNormalization() takes;
// --per-head sets per_head (whether the profile has head curves is ComputeBudgetMap()'s to check).
// Errors: InvalidArgument naming the flag ("--max-budget: must be >= 0 (0: none)"). The ratio
// and the bounds against each other are ComputeBudgetMap()'s (and the scheduler's) to check.
[[nodiscard]] StatusOr<method::BudgetOptions> BudgetOptionsFromFlags(const BudgetFlags& flags);

// The flags' bounds alone, for a command that chooses the budget itself (`ripplekv budgets
// --max-kl` and `--frontier`, the flag named `chooser`): every check of BudgetOptionsFromFlags()
// but the budget's, and neither --avg-budget nor --total-budget given (InvalidArgument
// "--avg-budget: not with --max-kl"). average_tokens is 0 and total_tokens unset.
[[nodiscard]] StatusOr<method::BudgetOptions> BoundOptionsFromFlags(const BudgetFlags& flags,
                                                                    std::string_view chooser);

}  // namespace ripplekv::cli
