// ripplekv budgets --profile P --avg-budget B --ratio R [--min-budget N] [--max-budget N]
//   [--normalization minmax|rank|log-minmax] [--format native|kvpress|trtllm] [--context-len L]
//   [--out FILE] [--json]
// Turns a sensitivity profile into per-layer KV-cache token budgets (DESIGN.md §2): the total is
// exactly L * B. stdout: a table, or the map in --format with --json; --out writes the file.

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "scheduler/budget/budget_format.h"
#include "scheduler/budget/budget_map.h"
#include "scheduler/budget/profile.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

struct BudgetsArgs {
  std::string profile;
  int64_t avg_budget = 0;
  double ratio = 2.0;
  int64_t min_budget = 1;
  int64_t max_budget = 0;   // 0: unbounded
  int64_t context_len = 0;  // 0: unknown
  std::string normalization = "minmax";
  std::string format = "native";
  std::string out;
  bool json = false;
};

int RunBudgets(const BudgetsArgs& args) {
  auto profile = scheduler::ReadProfileFile(args.profile);
  if (!profile.ok()) return ReportError(profile.status());
  auto normalization = scheduler::ParseNormalization(args.normalization);
  if (!normalization.ok()) return ReportError(normalization.status());
  auto format = scheduler::ParseBudgetFormat(args.format);
  if (!format.ok()) return ReportError(format.status());
  if (*format == scheduler::BudgetFormat::kKvpress && args.context_len <= 0) {
    return ReportError(absl::InvalidArgumentError(
        "--format kvpress needs --context-len (kvpress takes ratios of a context length)"));
  }
  scheduler::BudgetOptions options;
  options.ratio = args.ratio;
  options.average_tokens = args.avg_budget;
  options.min_tokens = args.min_budget;
  if (args.max_budget > 0) options.max_tokens = args.max_budget;
  if (args.context_len > 0) options.max_context = args.context_len;
  options.normalization = *normalization;
  auto map = scheduler::ComputeBudgetMap(*profile, options);
  if (!map.ok()) return ReportError(map.status());
  const std::optional<int64_t> context =
      args.context_len > 0 ? std::optional<int64_t>(args.context_len) : std::nullopt;
  if (!args.out.empty()) {
    if (Status s = scheduler::WriteBudgetMapFile(args.out, *map, *format, context); !s.ok()) {
      return ReportError(s);
    }
    spdlog::info("wrote {} budget map {}", args.format, args.out);
  }
  if (args.json) {
    auto text = scheduler::FormatBudgetMap(*map, *format, context);
    if (!text.ok()) return ReportError(text.status());
    std::fputs(text->c_str(), stdout);
    if (text->empty() || text->back() != '\n') std::fputc('\n', stdout);
    return kExitOk;
  }
  std::printf("%5s  %12s  %10s  %8s\n", "layer", "mean KL", "multiplier", "tokens");
  for (size_t i = 0; i < map->tokens.size(); ++i) {
    std::printf("%5lld  %12.6g  %10.3f  %8lld\n",
                static_cast<long long>(profile->layers[i].layer), profile->layers[i].mean_kl,
                map->multipliers[i], static_cast<long long>(map->tokens[i]));
  }
  std::printf("total %lld tokens over %zu layers (average %lld), ratio %.3g, %s\n",
              static_cast<long long>(map->total_tokens), map->tokens.size(),
              static_cast<long long>(args.avg_budget), args.ratio, args.normalization.c_str());
  return kExitOk;
}

}  // namespace

void AddBudgetsCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<BudgetsArgs>();
  CLI::App* cmd = app.add_subcommand("budgets", "Per-layer KV budgets from a sensitivity profile");
  cmd->add_option("--profile", a->profile, "Profile JSON from `ripplekv calibrate --out`")->required();
  cmd->add_option("--avg-budget", a->avg_budget, "Average tokens kept per layer B (total = L*B)")
      ->required();
  cmd->add_option("--ratio", a->ratio, "r >= 1: most sensitive layer gets r x the least")
      ->capture_default_str();
  cmd->add_option("--min-budget", a->min_budget, "Smallest budget of any layer, tokens")
      ->capture_default_str();
  cmd->add_option("--max-budget", a->max_budget, "Largest budget of any layer, tokens (0: none)")
      ->capture_default_str();
  cmd->add_option("--normalization", a->normalization, "minmax (default), rank or log-minmax")
      ->capture_default_str();
  cmd->add_option("--format", a->format, "native, kvpress or trtllm")->capture_default_str();
  cmd->add_option("--context-len", a->context_len,
                  "Context length: budgets above it are an error; needed by --format kvpress");
  cmd->add_option("-o,--out", a->out, "Write the budget map in --format here");
  cmd->add_flag("--json", a->json, "Print the map in --format instead of the table");
  cmd->callback([a, &run] { run = [a] { return RunBudgets(*a); }; });
}

}  // namespace ripplekv::cli
