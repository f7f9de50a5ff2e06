#include "cli/budget_flags.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/strings.h"

namespace ripplekv::cli {

namespace {

Status FlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

}  // namespace

void AddBudgetFlags(CLI::App* cmd, BudgetFlags& flags, BudgetFlagSet set) {
  flags.total_budget_offered = set.total_budget;
  CLI::Option* avg = cmd->add_option("--avg-budget", flags.avg_budget,
                                     "Average tokens kept per layer B (total = L*B)");
  if (set.avg_budget_required) avg->required();
  if (set.total_budget) {
    cmd->add_option("--total-budget", flags.total_budget,
                    "Total tokens T over all layers, instead of --avg-budget");
  }
  cmd->add_option("--ratio", flags.ratio,
                  "r >= 1: most sensitive layer gets r x the least (noise profiles)")
      ->capture_default_str();
  cmd->add_option(
         "--min-budget", flags.min_budget,
         "Smallest budget of any layer, tokens (a response profile: at least its selector's)")
      ->capture_default_str();
  cmd->add_option("--max-budget", flags.max_budget, "Largest budget of any layer, tokens (0: none)")
      ->capture_default_str();
  cmd->add_option("--normalization", flags.normalization,
                  "minmax (default), rank or log-minmax (noise profiles)")
      ->capture_default_str();
  cmd->add_option("--shrink-z", flags.shrink_z,
                  "Shrink noisy layers: use mean KL - Z x stderr (0: plain means; noise profiles)")
      ->capture_default_str();
  cmd->add_flag("--per-head", flags.per_head,
                "Budgets per KV head (a per-head response profile); trtllm output takes none");
  cmd->add_option("--context-len", flags.context_len,
                  "Context length: budgets above it are an error (a response profile: a cap); "
                  "needed for kvpress output");
}

namespace {

// Every flag but the budget's, as options with no budget set.
StatusOr<method::BudgetOptions> BoundsOnly(const BudgetFlags& flags) {
  if (flags.max_budget < 0) return FlagError("--max-budget", "must be >= 0 (0: none)");
  if (flags.context_len < 0) return FlagError("--context-len", "must be >= 0 (0: unknown)");
  if (!(flags.shrink_z >= 0) || !std::isfinite(flags.shrink_z)) {
    return FlagError("--shrink-z", "must be finite and >= 0 (0: plain means)");
  }
  StatusOr<method::Normalization> normalization = method::ParseNormalization(flags.normalization);
  if (!normalization.ok()) return FlagError("--normalization", normalization.status().message());

  method::BudgetOptions options;
  options.ratio = flags.ratio;
  options.min_tokens = flags.min_budget;
  if (flags.max_budget > 0) options.max_tokens = flags.max_budget;
  if (flags.context_len > 0) options.max_context = flags.context_len;
  options.normalization = *normalization;
  options.shrink_z = flags.shrink_z;
  options.per_head = flags.per_head;
  return options;
}

}  // namespace

StatusOr<method::BudgetOptions> BudgetOptionsFromFlags(const BudgetFlags& flags) {
  if (!flags.total_budget_offered && flags.avg_budget == 0) {
    return FlagError("--avg-budget", "must be > 0");
  }
  if ((flags.avg_budget != 0) == (flags.total_budget != 0)) {
    return absl::InvalidArgumentError("give one of --avg-budget and --total-budget");
  }
  if (flags.avg_budget < 0) return FlagError("--avg-budget", "must be > 0");
  if (flags.total_budget < 0) return FlagError("--total-budget", "must be > 0");
  ASSIGN_OR_RETURN(method::BudgetOptions options, BoundsOnly(flags));
  options.average_tokens = flags.avg_budget;
  if (flags.total_budget > 0) options.total_tokens = flags.total_budget;
  return options;
}

StatusOr<method::BudgetOptions> BoundOptionsFromFlags(const BudgetFlags& flags,
                                                      std::string_view chooser) {
  if (flags.avg_budget != 0) {
    return FlagError("--avg-budget", absl::StrCat("not with ", Sv(chooser)));
  }
  if (flags.total_budget != 0) {
    return FlagError("--total-budget", absl::StrCat("not with ", Sv(chooser)));
  }
  return BoundsOnly(flags);
}

}  // namespace ripplekv::cli
