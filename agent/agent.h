#pragma once
// The serving-node agent (docs/ROLLOUTS.md, "The agent"): keeps one RolloutService.WatchBudgets
// stream to the scheduler, makes the node's budget-map FILE hold the version each assignment names
// (agent/map_file.h), runs the operator's apply hook (agent/apply_hook.h) and reports the outcome
// with ReportBudget. It reconnects with exponential backoff and full jitter whenever the stream
// ends, stating what it holds, until Stop() or a refusal that retrying cannot fix.
//
// An Agent has no global state and handles no signals, so a process may run many of them, each on
// a thread of its own (a benchmark does); the daemon (agent/main.cc) runs one and calls Stop() on
// SIGTERM / SIGINT.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "method/budget_format.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace ripplekv::agent {

struct AgentOptions {
  std::string node_id;     // required: 1..128 characters [A-Za-z0-9._:-]
  std::string model_hash;  // required: the model the node serves
  // FILE: where the map is written (its directory must exist); the sidecar is FILE.state.json.
  std::string map_path;
  method::BudgetFormat format = method::BudgetFormat::kNative;  // how FILE is rendered
  std::string apply_command;  // run by /bin/sh -c after each write or removal; empty: none
  std::chrono::milliseconds apply_timeout{60000};  // the hook is killed after it; > 0
  std::string write_log_path;  // one JSON line appended per write or removal; empty: none
  std::chrono::milliseconds initial_backoff{100};  // first reconnect delay bound
  std::chrono::milliseconds max_backoff{5000};     // reconnect delay bound cap
  int report_attempts = 4;  // ReportBudget tries when the scheduler is unavailable; >= 1
  std::chrono::milliseconds report_deadline{10000};  // per ReportBudget try
  // The channel speaks plaintext (no --tls-ca): a stream that fails as a TLS port hangs up on a
  // plaintext client gets v1::kTlsHint in its log line (proto/client_channel.h).
  bool plaintext = false;
};

// InvalidArgument naming the field when `options` can never work (a node id or model hash the
// scheduler would refuse, no map path, a non-positive timeout or backoff, report_attempts < 1).
[[nodiscard]] Status ValidateAgentOptions(const AgentOptions& options);

// What an assignment asks of the agent, given what it holds.
enum class AssignmentStep {
  kReport,  // holds it already, applied: report ok, touch nothing
  kWrite,   // render and write the map, run the hook, report
  kRemove,  // remove FILE and the sidecar, run the hook, report
};

// The step for an assignment of `assigned_version` ("" : no map) when the node holds `held_version`
// ("" : nothing), `applied` saying whether the hook succeeded for it, and `files_exist` whether
// FILE or its sidecar is on disk. A node holding nothing with nothing on disk is told "" ->
// kReport.
[[nodiscard]] AssignmentStep NextStep(std::string_view assigned_version,
                                      std::string_view held_version, bool applied,
                                      bool files_exist);

// The held_version a WatchBudgets request states: `held_version` once applied, else "" (a map
// written but not applied is not held as far as the scheduler is concerned).
[[nodiscard]] std::string_view StatedVersion(std::string_view held_version, bool applied);

// Counters, and what the node holds now.
struct AgentStats {
  int64_t streams = 0;       // WatchBudgets streams opened
  int64_t assignments = 0;   // assignments received
  int64_t writes = 0;        // FILE written
  int64_t removals = 0;      // FILE removed
  int64_t failures = 0;      // assignments reported as failed (render, write or hook)
  int64_t reports_sent = 0;  // ReportBudget calls that succeeded
  int64_t reports_lost = 0;  // reports given up on
  std::string held_version;  // "" : nothing
  bool applied = false;      // the hook succeeded for held_version
};

class Agent {
 public:
  // Checks `options` (ValidateAgentOptions), opens the write log and reads what the node holds
  // (ReadHeldMap; a malformed sidecar is a warning and nothing held). `channel` is the scheduler's
  // (proto/client_channel.h: MakeClientChannel, with keepalive_without_calls for this long-lived
  // stream). Errors: InvalidArgument, NotFound (FILE's directory), the write log's open error.
  [[nodiscard]] static StatusOr<std::unique_ptr<Agent>> Create(
      const AgentOptions& options, std::shared_ptr<grpc::Channel> channel);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Watches and applies assignments until Stop() (then OK) or until the scheduler refuses the
  // agent: PermissionDenied, Unauthenticated or InvalidArgument from WatchBudgets are returned
  // (retrying cannot fix them). Every other end of the stream is retried. Call once.
  [[nodiscard]] Status Run();

  // Makes Run() return soon: cancels the stream and any ReportBudget call in flight, kills a
  // running apply hook (its map stays written, not applied) and wakes a reconnect wait. Callable
  // from any thread (not from a signal handler), before or during Run(); idempotent.
  void Stop();

  // Thread-safe.
  AgentStats stats() const;

 private:
  struct Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ripplekv::agent
