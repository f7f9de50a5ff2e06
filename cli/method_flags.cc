#include "cli/method_flags.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/profile_view.h"
#include "worker/data/calibration_data.h"

namespace ripplekv::cli {
namespace {

// "16,32,64" -> {16, 32, 64}; "" -> {} (the default grid). The grid's rules are the method's.
StatusOr<std::vector<int64_t>> ParseBudgetList(const std::string& text) {
  std::vector<int64_t> budgets;
  if (text.empty()) return budgets;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t budget = 0;
    if (!absl::SimpleAtoi(part, &budget)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--budgets: cannot parse '", part, "' (expected e.g. 16,32,64)"));
    }
    budgets.push_back(budget);
  }
  return budgets;
}

}  // namespace

void AddMethodFlags(CLI::App* cmd, MethodFlags& flags, std::string_view data_help) {
  CLI::Option* data = cmd->add_option("--data", flags.data, std::string(data_help));
  std::string names;
  for (std::string_view name : worker::BuiltinCalibrationNames()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(name));
  }
  cmd->add_option("--builtin", flags.builtin,
                  absl::StrCat("Built-in calibration set instead of --data: ", names, " (default ",
                               std::string(worker::kDefaultCalibrationBuiltin),
                               ": prose, code and docs in turn; docs/DATA.md)"))
      ->excludes(data);
  cmd->add_option("--data-seed", flags.data_seed,
                  "Seed of the order in which plain-text windows are spread over the text")
      ->capture_default_str();
  // The values are checked by CheckedCalibrationParams, with the method's messages (the same a
  // scheduler and a worker give), not by the parser.
  cmd->add_option("--samples", flags.samples, "Samples N")->capture_default_str();
  cmd->add_option("--context-len", flags.context_len, "Context tokens C per sample")
      ->capture_default_str();
  cmd->add_option("--probe", flags.probe, "Probe tokens W per sample (W < C)")
      ->capture_default_str();
  cmd->add_option("--alpha", flags.alpha,
                  "Noise scale: expected relative perturbation per value vector")
      ->capture_default_str();
  cmd->add_option("--trials", flags.trials, "Trials per (sample, layer)")->capture_default_str();
  cmd->add_option("--seed", flags.seed, "Noise seed")->capture_default_str();
  cmd->add_option("--mode", flags.mode, "cache (perturb the cache after prefill) or prefill")
      ->capture_default_str();
  cmd->add_option("--layers", flags.layers, "Layers to measure, e.g. 0-3,7 (default: all)");
  cmd->add_flag("--strict", flags.strict, "Reject the data when any sample is too short");
  cmd->add_option("--objective", flags.objective,
                  "What a trial measures: noise (norm-adaptive noise in one layer's values) or "
                  "response (compress one layer at a time to each budget with --selector and "
                  "measure the KL; one trial per budget, --trials is not read)")
      ->capture_default_str();
  cmd->add_option("--selector", flags.selector,
                  "Token selector of --objective response: snapkv, h2o or streaming")
      ->capture_default_str();
  std::string grid;
  for (int64_t budget : method::kDefaultResponseBudgets) {
    absl::StrAppend(&grid, grid.empty() ? "" : ",", budget);
  }
  cmd->add_option("--budgets", flags.budgets,
                  absl::StrCat("Budget grid of --objective response, tokens per KV head, e.g. "
                               "32,64,128 (default ",
                               grid,
                               "); budgets below the selector's smallest or not below "
                               "--context-len are dropped, and --context-len (the full cache) "
                               "is added"));
  cmd->add_flag("--per-head", flags.per_head,
                "With --objective response: measure every KV head of a layer alone (n_kv_heads "
                "times the trials), so `budgets --per-head` can give each head its own budget");
}

StatusOr<method::CalibrationParams> CheckedCalibrationParams(const MethodFlags& flags,
                                                             bool until_stable,
                                                             int64_t max_samples) {
  ASSIGN_OR_RETURN(const method::Objective objective, method::ParseObjective(flags.objective));
  ASSIGN_OR_RETURN(const method::ResponseSelector selector,
                   method::ParseResponseSelector(flags.selector));
  // A noise calibration reads no selector: one given is a mistake, not a choice to ignore.
  if (objective != method::Objective::kResponse && flags.selector != MethodFlags().selector) {
    return absl::InvalidArgumentError(
        absl::StrCat("--selector ", flags.selector, ": only with --objective response"));
  }
  if (flags.per_head && objective != method::Objective::kResponse) {
    return absl::InvalidArgumentError("--per-head: only with --objective response");
  }
  ASSIGN_OR_RETURN(const method::PerturbMode mode, method::ParsePerturbMode(flags.mode));
  ASSIGN_OR_RETURN(const std::vector<int> layers, ParseLayerList(flags.layers));
  ASSIGN_OR_RETURN(std::vector<int64_t> budgets, ParseBudgetList(flags.budgets));
  const method::CalibrationParams params =
      method::ResolveResponseGrid({.objective = objective,
                                   .mode = mode,
                                   .alpha = flags.alpha,
                                   .trials = flags.trials,
                                   .seed = flags.seed,
                                   .samples = flags.samples,
                                   .context_len = flags.context_len,
                                   .probe_len = flags.probe,
                                   .layers = {layers.begin(), layers.end()},
                                   .data_seed = flags.data_seed,
                                   .until_stable = until_stable,
                                   .max_samples = max_samples,
                                   .selector = selector,
                                   .budgets = std::move(budgets)});
  RETURN_IF_ERROR(method::ValidateCalibrationParams(params, /*n_layers=*/0));
  return params;
}

StatusOr<method::CalibrationParams> WithModelKvHeads(const MethodFlags& flags,
                                                     method::CalibrationParams params,
                                                     int64_t n_kv_heads) {
  if (!flags.per_head) return params;
  params.kv_heads = n_kv_heads;
  params = method::ResolveResponseGrid(std::move(params));
  if (Status s = method::ValidateCalibrationParams(params, /*n_layers=*/0); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--per-head: ", s.message()));
  }
  return params;
}

StatusOr<std::string> BuiltinFromFlags(const MethodFlags& flags) {
  const std::string name =
      flags.builtin.empty() ? std::string(worker::kDefaultCalibrationBuiltin) : flags.builtin;
  if (Status known = worker::CheckBuiltinCalibrationName(name); !known.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--builtin: ", known.message()));
  }
  return name;
}

}  // namespace ripplekv::cli
