// The rollout subcommands: moving a budget-map version through stages of a model's serving nodes
// (RolloutService, docs/ROLLOUTS.md).
//   ripplekv rollout start --scheduler ADDR --model-hash H --map VERSION [--stages 1,10%,50%,100%]
//     [--soak 30s] [--stage-timeout 5m] [--min-ack 0.9] [--watch [--nodes]] [--json]
//   ripplekv rollout status --scheduler ADDR ROLLOUT [--watch] [--nodes] [--json]
//   ripplekv rollout pause --scheduler ADDR ROLLOUT [--reason TEXT] [--json]
//   ripplekv rollout resume --scheduler ADDR ROLLOUT [--json]
//   ripplekv rollout rollback --scheduler ADDR ROLLOUT [--json]
//   ripplekv rollout list --scheduler ADDR [--model-hash H] [--json]
// Every command also takes the security flags of proto/client_security_flags.h.
// stdout (stable, for scripts):
//   start: exactly the rollout id as the only line; --json: the Rollout; --watch: the id line,
//     then as `status --watch`.
//   status: the status block of cli/rollout_view.h (--nodes: then a blank line and the node
//     table); --json: the Rollout.
//   status --watch: polls every 500 ms until the rollout SUCCEEDED or ROLLED_BACK (exit 0) or is
//     PAUSED (exit 4, kExitRolloutPaused, with the reason on stderr). On a terminal the block is
//     redrawn in place; otherwise one summary line per change. With --json the change lines go to
//     stderr and stdout gets only the final Rollout.
//   pause, resume, rollback: "<rollout id> <STATE>"; --json: the Rollout.
//   list: a table, newest first; --json: a ListRolloutsResponse with every rollout.
// Errors: one line "ripplekv: error: ..." on stderr; a server error starts with its code
// ("FAILED_PRECONDITION: ..."). Exit codes: cli/exit_codes.h. Flag values are checked before any
// call.

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/rollout_client.h"
#include "cli/rollout_view.h"
#include "proto/client_security_flags.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

// How often `--watch` asks for the rollout.
constexpr std::chrono::milliseconds kPollInterval{500};
// Consecutive UNAVAILABLE / DEADLINE_EXCEEDED answers `--watch` rides out before giving up; the
// wait between them doubles from kPollInterval up to kMaxRetryInterval.
constexpr int kMaxTransientFailures = 10;
constexpr std::chrono::milliseconds kMaxRetryInterval{5000};

struct RolloutArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;  // --tls-ca, --tls-cert, --tls-key, --token-file
  std::string rollout_id;
  std::string model_hash;
  bool json = false;
  bool watch = false;
  bool nodes = false;
  // start; empty strings: not given (the scheduler's defaults apply)
  std::string map_version;
  std::string stages;
  std::string soak;
  std::string stage_timeout;
  std::string min_ack;
  // pause
  std::string reason;
};

void SetDuration(std::chrono::milliseconds d, google::protobuf::Duration* out) {
  out->set_seconds(d.count() / 1000);
  out->set_nanos(static_cast<int32_t>((d.count() % 1000) * 1000000));
}

// The request of `rollout start`, every flag checked. Errors: InvalidArgument naming the flag.
StatusOr<v1::CreateRolloutRequest> StartRequest(const RolloutArgs& args) {
  v1::CreateRolloutRequest request;
  request.set_model_hash(args.model_hash);
  request.set_map_version(args.map_version);
  if (!args.stages.empty()) {
    ASSIGN_OR_RETURN(std::vector<v1::RolloutStage> stages, ParseStageList(args.stages, "--stages"));
    for (v1::RolloutStage& stage : stages) *request.add_stages() = std::move(stage);
  }
  if (!args.soak.empty()) {
    ASSIGN_OR_RETURN(std::chrono::milliseconds soak, ParseDuration(args.soak, "--soak"));
    SetDuration(soak, request.mutable_soak());
  }
  if (!args.stage_timeout.empty()) {
    ASSIGN_OR_RETURN(std::chrono::milliseconds timeout,
                     ParseDuration(args.stage_timeout, "--stage-timeout"));
    if (timeout.count() <= 0) {
      return absl::InvalidArgumentError("--stage-timeout: must be more than 0");
    }
    SetDuration(timeout, request.mutable_stage_timeout());
  }
  if (!args.min_ack.empty()) {
    double share = 0;
    if (!absl::SimpleAtod(args.min_ack, &share) || !(share > 0.0 && share <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--min-ack: \"", args.min_ack, "\" is not a share in (0, 1] (e.g. 0.9)"));
    }
    request.set_min_ack_share(share);
  }
  return request;
}

void PrintLines(const std::vector<std::string>& lines, FILE* out = stdout) {
  for (const std::string& line : lines) std::fprintf(out, "%s\n", line.c_str());
}

std::vector<std::string> StatusBlock(const v1::Rollout& rollout, bool nodes) {
  std::vector<std::string> lines = RolloutStatusLines(rollout);
  if (nodes) {
    lines.emplace_back();
    for (std::string& line : RolloutNodeTable(rollout)) lines.push_back(std::move(line));
  }
  return lines;
}

// Terminal rows `lines` take on stdout's terminal (long lines wrap).
int TerminalRows(const std::vector<std::string>& lines) {
  winsize ws{};
  const size_t width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  int rows = 0;
  for (const std::string& line : lines) {
    rows += static_cast<int>(std::max<size_t>(1, (line.size() + width - 1) / width));
  }
  return rows;
}

// Polls the rollout until it is finished (kExitOk) or paused (kExitRolloutPaused), showing it as
// the file comment says. Rides out a scheduler that is briefly unreachable.
int WatchRollout(RolloutClient& client, const std::string& rollout_id, bool nodes, bool json) {
  const bool redraw = !json && isatty(STDOUT_FILENO) == 1;
  FILE* const lines_out = json ? stderr : stdout;
  int drawn_rows = 0;  // rows of the block now on the terminal, to move up over
  std::string last_key;
  int failures = 0;
  auto retry_interval = kPollInterval;
  while (true) {
    StatusOr<v1::Rollout> rollout = client.GetRollout(rollout_id);
    if (!rollout.ok()) {
      const absl::StatusCode code = rollout.status().code();
      const bool transient =
          code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
      if (!transient || ++failures >= kMaxTransientFailures) {
        return ReportError(ServerError(rollout.status()));
      }
      spdlog::warn("rollout {}: {}; retrying in {} ms", rollout_id,
                   std::string(rollout.status().message()), retry_interval.count());
      drawn_rows = 0;  // the warning is below the block now; draw a fresh one after it
      std::this_thread::sleep_for(retry_interval);
      retry_interval = std::min(retry_interval * 2, kMaxRetryInterval);
      continue;
    }
    failures = 0;
    retry_interval = kPollInterval;
    const v1::RolloutState state = rollout->state();
    const bool done = IsFinished(state) || state == v1::ROLLOUT_STATE_PAUSED;
    if (redraw) {
      const std::vector<std::string> block = StatusBlock(*rollout, nodes);
      std::string out;
      for (int i = 0; i < drawn_rows; ++i) out += "\x1b[1A\x1b[2K";  // up one row, clear it
      for (const std::string& line : block) absl::StrAppend(&out, "\r\x1b[2K", line, "\n");
      std::fputs(out.c_str(), stdout);
      std::fflush(stdout);
      drawn_rows = TerminalRows(block);
    } else if (const std::string key = RolloutChangeKey(*rollout); key != last_key) {
      std::fprintf(lines_out, "%s\n", RolloutSummaryLine(*rollout).c_str());
      std::fflush(lines_out);
      last_key = key;
    }
    if (done) {
      if (!redraw && nodes) PrintLines(RolloutNodeTable(*rollout), lines_out);
      if (json) std::printf("%s\n", ProtoToJson(*rollout).c_str());
      if (IsFinished(state)) return kExitOk;
      std::fprintf(
          stderr, "ripplekv: rollout %s paused: %s\n", rollout_id.c_str(),
          rollout->pause_reason().empty() ? "(no reason given)" : rollout->pause_reason().c_str());
      return kExitRolloutPaused;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

int RunStart(const RolloutArgs& args) {
  StatusOr<v1::CreateRolloutRequest> request = StartRequest(args);
  if (!request.ok()) return ReportError(request.status());
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto rollout = client->CreateRollout(*request);
  if (!rollout.ok()) return ReportError(ServerError(rollout.status()));
  spdlog::info("started rollout {} of map {} to model {} ({} stages)", rollout->rollout_id(),
               rollout->map_version(), rollout->model_hash().substr(0, 12), rollout->stages_size());
  if (args.watch) {
    if (!args.json) {
      std::printf("%s\n", rollout->rollout_id().c_str());
      std::fflush(stdout);
    }
    return WatchRollout(*client, rollout->rollout_id(), args.nodes, args.json);
  }
  if (args.json) {
    std::printf("%s\n", ProtoToJson(*rollout).c_str());
  } else {
    std::printf("%s\n", rollout->rollout_id().c_str());
  }
  return kExitOk;
}

int RunStatus(const RolloutArgs& args) {
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  if (args.watch) return WatchRollout(*client, args.rollout_id, args.nodes, args.json);
  auto rollout = client->GetRollout(args.rollout_id);
  if (!rollout.ok()) return ReportError(ServerError(rollout.status()));
  if (args.json) {
    std::printf("%s\n", ProtoToJson(*rollout).c_str());
  } else {
    PrintLines(StatusBlock(*rollout, args.nodes));
  }
  return kExitOk;
}

// pause, resume and rollback: one call, then "<id> <STATE>" or the Rollout as JSON.
int RunChange(const RolloutArgs& args,
              StatusOr<v1::Rollout> (*change)(RolloutClient&, const RolloutArgs&)) {
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  StatusOr<v1::Rollout> rollout = change(*client, args);
  if (!rollout.ok()) return ReportError(ServerError(rollout.status()));
  if (args.json) {
    std::printf("%s\n", ProtoToJson(*rollout).c_str());
  } else {
    std::printf("%s %s\n", rollout->rollout_id().c_str(),
                RolloutStateName(rollout->state()).c_str());
  }
  return kExitOk;
}

int RunList(const RolloutArgs& args) {
  auto client = RolloutClient::Connect(args.scheduler, args.security);
  if (!client.ok()) return ReportError(client.status());
  auto rollouts = client->ListRollouts(args.model_hash);
  if (!rollouts.ok()) return ReportError(ServerError(rollouts.status()));
  if (args.json) {
    v1::ListRolloutsResponse all;
    for (const v1::Rollout& r : *rollouts) *all.add_rollouts() = r;
    std::printf("%s\n", ProtoToJson(all).c_str());
    return kExitOk;
  }
  PrintLines(RolloutListTable(*rollouts));
  return kExitOk;
}

CLI::App* AddCommand(CLI::App* parent, const std::string& name, const std::string& help,
                     RolloutArgs& a, bool with_id) {
  CLI::App* cmd = parent->add_subcommand(name, help);
  cmd->add_option("--scheduler", a.scheduler, "Scheduler address host:port")->required();
  v1::AddClientSecurityFlags(cmd, a.security);
  if (with_id) cmd->add_option("rollout", a.rollout_id, "Rollout id (e.g. r12)")->required();
  return cmd;
}

constexpr const char* kWatchHelp =
    "Follow the rollout until it SUCCEEDED or ROLLED_BACK (exit 0) or PAUSED (exit 4, reason on "
    "stderr); redrawn in place on a terminal, else one line per change";

}  // namespace

void AddRolloutCommands(CLI::App& app, Action& run) {
  CLI::App* rollout =
      app.add_subcommand("rollout", "Move a budget-map version to a model's serving nodes");
  rollout->require_subcommand(1);
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "start", "Start rolling out a map version", *a, false);
    cmd->add_option("--model-hash", a->model_hash, "Model hash (64 hex digits)")->required();
    cmd->add_option("--map", a->map_version, "Map version id (`ripplekv map create`)")->required();
    cmd->add_option("--stages", a->stages,
                    "Stage sizes, growing: node counts (3) or percents of the connected nodes "
                    "(10%) (default: 1,10%,50%,100%)");
    cmd->add_option("--soak", a->soak,
                    "Least time a stage is held once acknowledged, e.g. 30s, 5m, 1h30m "
                    "(default: 0)");
    cmd->add_option("--stage-timeout", a->stage_timeout,
                    "Longest time a stage may take before the rollout pauses (default: 5m)");
    cmd->add_option("--min-ack", a->min_ack,
                    "Share of a stage's nodes that must acknowledge, in (0, 1] (default: 1)");
    cmd->add_flag("--watch", a->watch, kWatchHelp);
    cmd->add_flag("--nodes", a->nodes, "With --watch: also show the per-node table");
    cmd->add_flag("--json", a->json,
                  "Print the Rollout as JSON (with --watch: the final one; changes on stderr)");
    cmd->footer(
        "stdout: exactly the rollout id as the only line (--json: the Rollout; --watch: the id "
        "line, then as `rollout status --watch`).");
    cmd->callback([a, &run] { run = [a] { return RunStart(*a); }; });
  }
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "status", "Show a rollout", *a, true);
    cmd->add_flag("--watch", a->watch, kWatchHelp);
    cmd->add_flag("--nodes", a->nodes, "Also show the per-node table");
    cmd->add_flag("--json", a->json,
                  "Print the Rollout as JSON (with --watch: the final one; changes on stderr)");
    cmd->footer(
        "stdout: one \"key value\" line each for rollout, model, map, state, stage, nodes, "
        "connected, soak, timeout and (when set) reason.");
    cmd->callback([a, &run] { run = [a] { return RunStatus(*a); }; });
  }
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "pause", "Stop a running rollout where it is", *a, true);
    cmd->add_option("--reason", a->reason, "Recorded as the pause reason");
    cmd->add_flag("--json", a->json, "Print the Rollout as JSON");
    cmd->callback([a, &run] {
      run = [a] {
        return RunChange(*a, [](RolloutClient& c, const RolloutArgs& args) {
          return c.PauseRollout(args.rollout_id, args.reason);
        });
      };
    });
  }
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "resume", "Continue a paused rollout", *a, true);
    cmd->add_flag("--json", a->json, "Print the Rollout as JSON");
    cmd->callback([a, &run] {
      run = [a] {
        return RunChange(*a, [](RolloutClient& c, const RolloutArgs& args) {
          return c.ResumeRollout(args.rollout_id);
        });
      };
    });
  }
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "rollback",
                               "Give every node of the rollout the map it held before", *a, true);
    cmd->add_flag("--json", a->json, "Print the Rollout as JSON");
    cmd->callback([a, &run] {
      run = [a] {
        return RunChange(*a, [](RolloutClient& c, const RolloutArgs& args) {
          return c.RollbackRollout(args.rollout_id);
        });
      };
    });
  }
  {
    auto a = std::make_shared<RolloutArgs>();
    CLI::App* cmd = AddCommand(rollout, "list", "List rollouts, newest first", *a, false);
    cmd->add_option("--model-hash", a->model_hash, "Only this model's rollouts");
    cmd->add_flag("--json", a->json, "Print JSON instead of the table");
    cmd->callback([a, &run] { run = [a] { return RunList(*a); }; });
  }
}

}  // namespace ripplekv::cli
