// ripplekv budgets (--profile P | --scheduler ADDR --model-hash H [--version V]) --avg-budget B
//   --ratio R [--min-budget N] [--max-budget N] [--normalization minmax|rank|log-minmax] [--format native|kvpress|trtllm] [--context-len L]
//   [--out FILE] [--json]
// Turns a sensitivity profile into per-layer KV-cache token budgets (docs/DESIGN.md §2): the total is
// exactly L * B. With --scheduler the map is computed by the scheduler (GetBudgetMap, the same
// library) from its stored profile; the security flags of proto/client_security_flags.h apply.
// stdout: a table, or the map in --format with --json; --out writes the file.

#include <cstdio>
#include <memory>
#include <optional>
#include <utility>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/budget_flags.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/remote_client.h"
#include "proto/budget_params.h"
#include "proto/client_security_flags.h"
#include "proto/profile.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

struct BudgetsArgs {
  std::string profile;
  std::string scheduler;   // remote: the scheduler's address, instead of --profile
  v1::ClientSecurityFiles security;  // remote: --tls-ca, --tls-cert, --tls-key, --token-file
  std::string model_hash;  // remote: the profile's model hash
  int64_t version = 0;     // remote: profile version; 0: the latest
  // --avg-budget is required; --total-budget is not offered.
  BudgetFlags budget;
  std::string format = "native";
  std::string out;
  bool json = false;
};

// GetBudgetMap on the scheduler, and the profile it used (for the table's mean KL column).
StatusOr<std::pair<method::SensitivityProfile, method::BudgetMap>> RemoteBudgetMap(
    const BudgetsArgs& args, const method::BudgetOptions& options,
    method::BudgetFormat format) {
  ASSIGN_OR_RETURN(RemoteClient client, RemoteClient::Connect(args.scheduler, args.security));
  v1::GetBudgetMapRequest request;
  request.set_model_hash(args.model_hash);
  request.set_profile_version(args.version);
  v1::BudgetParams* p = request.mutable_params();
  *p = v1::BudgetParamsFromOptions(options);
  p->set_format(format == method::BudgetFormat::kKvpress  ? v1::BUDGET_FORMAT_KVPRESS
                : format == method::BudgetFormat::kTrtllm ? v1::BUDGET_FORMAT_TRTLLM
                                                             : v1::BUDGET_FORMAT_NATIVE);
  ASSIGN_OR_RETURN(v1::BudgetMap remote, client.GetBudgetMap(request));
  ASSIGN_OR_RETURN(v1::Profile profile, client.GetProfile(args.model_hash, remote.profile_version()));
  method::BudgetMap map;
  map.model_hash = remote.model_hash();
  map.options = options;
  map.total_tokens = remote.total_tokens();
  map.tokens.assign(remote.tokens().begin(), remote.tokens().end());
  map.multipliers.assign(remote.multipliers().begin(), remote.multipliers().end());
  map.normalized.assign(remote.normalized().begin(), remote.normalized().end());
  return std::make_pair(v1::ProfileFromProto(profile), std::move(map));
}

int RunBudgets(const BudgetsArgs& args) {
  const bool remote = !args.scheduler.empty();
  if (remote == !args.profile.empty() || remote == args.model_hash.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "give either --profile, or --scheduler with --model-hash"));
  }
  StatusOr<method::SensitivityProfile> profile =
      remote ? method::SensitivityProfile{} : method::ReadProfileFile(args.profile);
  if (!profile.ok()) return ReportError(profile.status());
  StatusOr<method::BudgetOptions> options = BudgetOptionsFromFlags(args.budget);
  if (!options.ok()) return ReportError(options.status());
  auto format = method::ParseBudgetFormat(args.format);
  if (!format.ok()) return ReportError(format.status());
  if (*format == method::BudgetFormat::kKvpress && !options->max_context) {
    return ReportError(absl::InvalidArgumentError(
        "--format kvpress needs --context-len (kvpress takes ratios of a context length)"));
  }
  StatusOr<method::BudgetMap> map = absl::UnknownError("unset");
  if (remote) {
    auto fetched = RemoteBudgetMap(args, *options, *format);
    if (!fetched.ok()) return ReportError(fetched.status());
    *profile = std::move(fetched->first);
    map = std::move(fetched->second);
  } else {
    map = method::ComputeBudgetMap(*profile, *options);
  }
  if (!map.ok()) return ReportError(map.status());
  if (map->tokens.size() != profile->layers.size()) {
    return ReportError(absl::DataLossError(absl::StrCat(
        "budget map has ", map->tokens.size(), " layers, profile ", profile->layers.size())));
  }
  const std::optional<int64_t> context = options->max_context;
  if (!args.out.empty()) {
    if (Status s = method::WriteBudgetMapFile(args.out, *map, *format, context); !s.ok()) {
      return ReportError(s);
    }
    spdlog::info("wrote {} budget map {}", args.format, args.out);
  }
  if (args.json) {
    auto text = method::FormatBudgetMap(*map, *format, context);
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
              static_cast<long long>(args.budget.avg_budget), args.budget.ratio,
              args.budget.normalization.c_str());
  return kExitOk;
}

}  // namespace

void AddBudgetsCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<BudgetsArgs>();
  CLI::App* cmd = app.add_subcommand("budgets", "Per-layer KV budgets from a sensitivity profile");
  cmd->add_option("--profile", a->profile, "Profile JSON from `ripplekv calibrate --out`");
  cmd->add_option("--scheduler", a->scheduler,
                  "Ask this scheduler (host:port) instead of reading --profile");
  v1::AddClientSecurityFlags(cmd, a->security);
  cmd->add_option("--model-hash", a->model_hash, "With --scheduler: the profile's model hash");
  cmd->add_option("--version", a->version, "With --scheduler: profile version (0: latest)")
      ->capture_default_str();
  AddBudgetFlags(cmd, a->budget, {.avg_budget_required = true});
  cmd->add_option("--format", a->format, "native, kvpress or trtllm")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "Write the budget map in --format here");
  cmd->add_flag("--json", a->json, "Print the map in --format instead of the table");
  cmd->callback([a, &run] { run = [a] { return RunBudgets(*a); }; });
}

}  // namespace ripplekv::cli
