// The map subcommands: frozen budget-map versions on a scheduler (RolloutService,
// docs/ROLLOUTS.md).
//   ripplekv map create --scheduler ADDR --model-hash H [--profile-version N]
//     (--avg-budget B | --total-budget T) [--ratio R] [--min-budget N] [--max-budget N]
//     [--normalization minmax|rank|log-minmax] [--shrink-z Z] [--per-head] [--context-len L]
//     [--selection METHOD [--window W | --sinks N]] [--selection-param KEY=VALUE]...
//     [--table | --json]
//   ripplekv map get --scheduler ADDR --model-hash H VERSION|latest
//     [--format native|kvpress|trtllm|document]
//   ripplekv map list --scheduler ADDR --model-hash H [--json]
// The budget flags are `ripplekv budgets`'s. Every command also takes the security flags of
// proto/client_security_flags.h.
// stdout (stable, for scripts):
//   create: exactly the version id as the only line; --table: the version's facts and per-layer
//     tokens; --json: the CreateBudgetMapResponse. Whether the version existed goes to stderr.
//   get: exactly the bytes of the map in --format, with nothing added (no trailing newline), the
//     same bytes a serving node's agent writes.
//   list: a table, newest first; --json: a ListBudgetMapVersionsResponse with every version.
// Errors: one line "ripplekv: error: ..." on stderr; a server error starts with its code
// ("NOT_FOUND: ..."). Exit codes: cli/exit_codes.h. Flag values are checked before any call.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/budget_flags.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/remote_client.h"
#include "cli/rollout_client.h"
#include "cli/rollout_view.h"
#include "method/budget_map.h"
#include "method/frozen_map.h"
#include "proto/budget_params.h"
#include "proto/client_security_flags.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

struct MapArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  std::string model_hash;
  bool json = false;
  // create
  int64_t profile_version = 0;                // 0: the latest
  BudgetFlags budget;                         // with --selection, the method the map is meant for
  std::vector<std::string> selection_params;  // KEY=VALUE each
  bool table = false;
  // get
  std::string version;  // a version id or "latest"
  std::string format = "native";
};

Status FlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

// The request of `map create` with the budget `options` of its flags, every other flag checked.
// Errors: InvalidArgument naming the flag.
StatusOr<v1::CreateBudgetMapRequest> CreateRequest(const MapArgs& args,
                                                   const method::BudgetOptions& options) {
  if (args.profile_version < 0) return FlagError("--profile-version", "must be >= 0 (0: latest)");

  method::SelectionIntent intent;
  intent.method = args.budget.selection;
  if (Status s = method::ValidateSelectionIntent(intent); !s.ok()) {
    return FlagError("--selection", s.message());
  }
  for (const std::string& item : args.selection_params) {
    ASSIGN_OR_RETURN(auto kv, ParseKeyValue(item, "--selection-param"));
    if (!intent.params.emplace(kv.first, kv.second).second) {
      return FlagError("--selection-param", absl::StrCat("key \"", kv.first, "\" given twice"));
    }
  }
  // What sets the selector's floor is recorded with it (--window 64: {"window": "64"}).
  ASSIGN_OR_RETURN(const std::optional<SelectionFloor> floor, SelectionFloorFromFlags(args.budget));
  if (floor) {
    for (const auto& [key, value] : floor->params) {
      const auto [it, added] = intent.params.emplace(key, value);
      if (!added && it->second != value) {
        return FlagError("--selection-param",
                         absl::StrCat(key, "=", it->second, " disagrees with --", key, " ", value));
      }
    }
  }
  if (Status s = method::ValidateSelectionIntent(intent); !s.ok()) {
    return FlagError("--selection-param", s.message());
  }

  v1::CreateBudgetMapRequest request;
  request.set_model_hash(args.model_hash);
  request.set_profile_version(args.profile_version);
  *request.mutable_params() = v1::BudgetParamsFromOptions(options);
  v1::SelectionIntent* selection = request.mutable_selection();
  selection->set_method(intent.method);
  for (const auto& [key, value] : intent.params) (*selection->mutable_params())[key] = value;
  return request;
}

void PrintLines(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
}

// The per-layer tokens of the map the scheduler computes under `options` (GetBudgetMap).
StatusOr<std::vector<int64_t>> ScheduledLayerTokens(const MapArgs& args,
                                                    const method::BudgetOptions& options) {
  ASSIGN_OR_RETURN(RemoteClient client, RemoteClient::Connect(args.scheduler, args.security));
  v1::GetBudgetMapRequest request;
  request.set_model_hash(args.model_hash);
  request.set_profile_version(args.profile_version);
  *request.mutable_params() = v1::BudgetParamsFromOptions(options);
  ASSIGN_OR_RETURN(v1::BudgetMap map, client.GetBudgetMap(request));
  return std::vector<int64_t>(map.tokens().begin(), map.tokens().end());
}

int RunMapCreate(const MapArgs& args) {
  StatusOr<method::BudgetOptions> options = BudgetOptionsFromFlags(args.budget);
  if (!options.ok()) return ReportError(options.status());
  StatusOr<v1::CreateBudgetMapRequest> request = CreateRequest(args, *options);
  if (!request.ok()) return ReportError(request.status());
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto response = client->CreateBudgetMap(*request);
  if (!response.ok() && response.status().code() == absl::StatusCode::kInvalidArgument) {
    // A layer above --context-len: capped there, as `budgets` does.
    StatusOr<std::optional<method::BudgetOptions>> capped = CapAtContext(
        *options, [&](const method::BudgetOptions& o) { return ScheduledLayerTokens(args, o); });
    if (!capped.ok()) return ReportError(capped.status());
    if (*capped) {
      request = CreateRequest(args, **capped);
      if (!request.ok()) return ReportError(request.status());
      response = client->CreateBudgetMap(*request);
    }
  }
  if (!response.ok()) return ReportError(ServerError(response.status()));
  const v1::BudgetMapVersion& map = response->map();
  spdlog::info("{} map version {} (sequence {}) of model {}, profile version {}",
               response->existing() ? "existing" : "created", map.version(), map.sequence(),
               map.model_hash().substr(0, 12), map.profile_version());
  if (args.json) {
    std::printf("%s\n", ProtoToJson(*response).c_str());
  } else if (args.table) {
    PrintLines(MapVersionLines(map, response->existing()));
  } else {
    std::printf("%s\n", map.version().c_str());
  }
  return kExitOk;
}

int RunMapGet(const MapArgs& args) {
  if (Status s = CheckMapFormat(args.format, "--format"); !s.ok()) return ReportError(s);
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto map = client->GetBudgetMap(args.model_hash, args.version);
  if (!map.ok()) return ReportError(ServerError(map.status()));
  StatusOr<std::string> bytes = RenderMapVersion(*map, args.format);
  if (!bytes.ok()) return ReportError(bytes.status());
  if (std::fwrite(bytes->data(), 1, bytes->size(), stdout) != bytes->size() ||
      std::fflush(stdout) != 0) {
    return ReportError(absl::UnknownError("writing the map to stdout failed"));
  }
  return kExitOk;
}

int RunMapList(const MapArgs& args) {
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto maps = client->ListBudgetMaps(args.model_hash);
  if (!maps.ok()) return ReportError(ServerError(maps.status()));
  if (args.json) {
    v1::ListBudgetMapVersionsResponse all;
    for (const v1::BudgetMapVersion& map : *maps) *all.add_maps() = map;
    std::printf("%s\n", ProtoToJson(all).c_str());
    return kExitOk;
  }
  PrintLines(MapListTable(*maps));
  return kExitOk;
}

void AddCommon(CLI::App* cmd, MapArgs& a) {
  cmd->add_option("--scheduler", a.scheduler, "Scheduler address host:port")->required();
  v1::AddClientSecurityFlags(cmd, a.security);
  cmd->add_option("--model-hash", a.model_hash, "Model hash (64 hex digits)")->required();
}

}  // namespace

void AddMapCommands(CLI::App& app, Action& run) {
  CLI::App* map = app.add_subcommand("map", "Frozen budget-map versions stored by a scheduler");
  map->require_subcommand(1);
  {
    auto a = std::make_shared<MapArgs>();
    CLI::App* cmd = map->add_subcommand(
        "create", "Freeze a budget map of a stored profile into a version (idempotent)");
    AddCommon(cmd, *a);
    cmd->add_option("--profile-version", a->profile_version, "Profile version (0: the latest)")
        ->capture_default_str();
    AddBudgetFlags(cmd, a->budget, {.total_budget = true, .other_selections_recorded = true});
    cmd->add_option("--selection-param", a->selection_params,
                    "KEY=VALUE parameter of --selection; repeat the flag for more")
        ->allow_extra_args(false);
    auto* table = cmd->add_flag("--table", a->table,
                                "Print the version, sequence, whether it existed and per-layer "
                                "tokens instead of the id alone");
    cmd->add_flag("--json", a->json, "Print the response as JSON instead of the id alone")
        ->excludes(table);
    cmd->footer(
        "stdout: exactly the version id as the only line (--table: the version and per-layer "
        "tokens; --json: the response). Whether the version existed is logged on stderr.");
    cmd->callback([a, &run] { run = [a] { return RunMapCreate(*a); }; });
  }
  {
    auto a = std::make_shared<MapArgs>();
    CLI::App* cmd = map->add_subcommand("get", "Print one map version in a serving format");
    AddCommon(cmd, *a);
    cmd->add_option("version", a->version, "Version id, or latest")->required();
    cmd->add_option("--format", a->format,
                    "native, kvpress, trtllm (the map as a serving node holds it) or document "
                    "(the frozen document as stored)")
        ->capture_default_str();
    cmd->footer(
        "stdout: exactly the bytes of the map in --format, nothing added (no trailing newline): "
        "what a serving node's agent writes for it.");
    cmd->callback([a, &run] { run = [a] { return RunMapGet(*a); }; });
  }
  {
    auto a = std::make_shared<MapArgs>();
    CLI::App* cmd = map->add_subcommand("list", "List a model's map versions, newest first");
    AddCommon(cmd, *a);
    cmd->add_flag("--json", a->json, "Print JSON instead of the table");
    cmd->callback([a, &run] { run = [a] { return RunMapList(*a); }; });
  }
}

}  // namespace ripplekv::cli
