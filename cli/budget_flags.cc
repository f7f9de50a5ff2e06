#include "cli/budget_flags.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

Status FlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

}  // namespace

void AddBudgetFlags(CLI::App* cmd, BudgetFlags& flags, BudgetFlagSet set) {
  flags.total_budget_offered = set.total_budget;
  flags.other_selections_recorded = set.other_selections_recorded;
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
                  "Context length: no layer keeps more (a map that would is capped there, the "
                  "excess spread over the other layers); needed for kvpress output");
  cmd->add_option("--selection", flags.selection,
                  set.other_selections_recorded
                      ? "The KV selection method the map is meant for: snapkv, h2o or streaming "
                        "set the floor it needs (--window, --sinks); other names are recorded only"
                      : "The token selector the map is meant for: snapkv, h2o or streaming; every "
                        "layer keeps at least what it needs (--window, --sinks)");
  cmd->add_option("--window", flags.window,
                  absl::StrCat("With --selection snapkv: its observation window, tokens, the "
                               "smallest budget of any layer (default ",
                               kDefaultSnapKvWindow, "; kvpress's SnapKVPress: 64)"));
  cmd->add_option("--sinks", flags.sinks,
                  absl::StrCat("With --selection streaming: its sink tokens, the smallest budget "
                               "of any layer (default ",
                               kDefaultStreamingSinks, ", as kvpress's StreamingLLMPress)"));
}

StatusOr<std::optional<SelectionFloor>> SelectionFloorFromFlags(const BudgetFlags& flags) {
  if (flags.window < 0) return FlagError("--window", "must be >= 1");
  if (flags.sinks < 0) return FlagError("--sinks", "must be >= 1");
  if (flags.window != 0 && flags.selection != "snapkv") {
    return FlagError("--window", "only with --selection snapkv");
  }
  if (flags.sinks != 0 && flags.selection != "streaming") {
    return FlagError("--sinks", "only with --selection streaming");
  }
  if (flags.selection.empty()) return std::nullopt;
  SelectionFloor floor{.method = flags.selection};
  if (flags.selection == "snapkv") {
    floor.min_tokens = flags.window != 0 ? flags.window : kDefaultSnapKvWindow;
    floor.params["window"] = absl::StrCat(floor.min_tokens);
  } else if (flags.selection == "streaming") {
    floor.min_tokens = flags.sinks != 0 ? flags.sinks : kDefaultStreamingSinks;
    floor.params["sinks"] = absl::StrCat(floor.min_tokens);
  } else if (flags.selection != "h2o") {
    if (flags.other_selections_recorded) return std::nullopt;
    return FlagError("--selection", absl::StrCat("unknown selector \"", flags.selection,
                                                 "\" (known: snapkv, h2o, streaming)"));
  }
  return floor;
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
  ASSIGN_OR_RETURN(const std::optional<SelectionFloor> floor, SelectionFloorFromFlags(flags));
  if (floor && floor->min_tokens > options.min_tokens) {
    spdlog::info(
        "--selection {}: every layer keeps at least {} tokens (the selector's floor), so "
        "--min-budget is {} (was {})",
        floor->method, floor->min_tokens, floor->min_tokens, options.min_tokens);
    options.min_tokens = floor->min_tokens;
  }
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

StatusOr<std::optional<method::BudgetOptions>> CapAtContext(const method::BudgetOptions& options,
                                                            const LayerTokensFn& layer_tokens) {
  if (!options.max_context) return std::nullopt;
  const int64_t context = *options.max_context;
  if (options.max_tokens && *options.max_tokens <= context) return std::nullopt;
  method::BudgetOptions uncapped = options;
  uncapped.max_context.reset();
  ASSIGN_OR_RETURN(const std::vector<int64_t> tokens, layer_tokens(uncapped));
  const auto over =
      std::count_if(tokens.begin(), tokens.end(), [context](int64_t t) { return t > context; });
  if (over == 0) return std::nullopt;
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  const auto layers = static_cast<int64_t>(tokens.size());
  if (static_cast<__int128>(layers) * context < total) {
    return FlagError(options.total_tokens ? "--total-budget" : "--avg-budget",
                     absl::StrCat(total, " tokens do not fit ", layers,
                                  " layers of at most "
                                  "--context-len ",
                                  context, " tokens each"));
  }
  spdlog::warn(
      "{} of {} layers would keep more than --context-len {} tokens (up to {}); capped "
      "there, the excess spread over the other layers",
      over, layers, context, *std::max_element(tokens.begin(), tokens.end()));
  method::BudgetOptions capped = options;
  capped.max_tokens = context;
  return capped;
}

}  // namespace ripplekv::cli
