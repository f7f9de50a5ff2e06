// ripplekv-agent --scheduler ADDR --node-id ID --model-hash H --out FILE
//   [--format native|kvpress|trtllm] [--apply-cmd CMD] [--apply-timeout SECONDS] [--write-log F]
//   [--tls-ca F [--tls-cert F --tls-key F] [--tls-server-name N]] [--token-file F]
//
// The serving-node agent (docs/ROLLOUTS.md, "The agent"): keeps FILE holding the budget map the
// scheduler assigns this node, in the node's format, runs --apply-cmd after each change and
// reports the outcome. Security (docs/SECURITY.md): --tls-ca verifies the scheduler's certificate
// (without it the agent speaks plaintext, which a scheduler serves on loopback only);
// --tls-cert/--tls-key present a client certificate; --token-file holds the agent role's token.
//
// Runs until SIGTERM or SIGINT (the stream is cancelled, a running hook killed). Exit codes: 0
// stopped by a signal; 1 a startup error (bad flag, unreadable TLS or token file, FILE's directory
// missing, the write log not writable); 2 the scheduler refused the agent (PERMISSION_DENIED,
// UNAUTHENTICATED or INVALID_ARGUMENT from WatchBudgets: a wrong token or node id).

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "base/stop_signals.h"
#include "base/version.h"
#include "method/budget_format.h"
#include "proto/client_channel.h"
#include "proto/client_security_flags.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace ripplekv::agent {
namespace {

int Fail(const Status& s) {
  spdlog::error("{}", s.ToString());
  return 1;
}

int Main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("ripplekv-agent"));  // stdout stays clean
  CLI::App app{"RippleKV serving-node agent: writes the budget map the scheduler assigns"};
  app.set_version_flag("--version", [] {
    return VersionText("ripplekv-agent", {{"grpc", grpc::Version()}});
  });
  std::string scheduler, format = "native";
  AgentOptions options;
  double apply_timeout_s = 60;
  app.add_option("--scheduler", scheduler, "Scheduler address host:port")->required();
  app.add_option("--node-id", options.node_id, "This serving node's id (1..128 [A-Za-z0-9._:-])")
      ->required();
  app.add_option("--model-hash", options.model_hash, "Hash of the model the node serves")
      ->required();
  app.add_option("--out", options.map_path,
                 "Budget-map file to keep (FILE.state.json beside it records what it holds)")
      ->required();
  app.add_option("--format", format, "Format of the file")
      ->capture_default_str()
      ->check(CLI::IsMember({"native", "kvpress", "trtllm"}));
  app.add_option("--apply-cmd", options.apply_command,
                 "Shell command run after each write or removal (env RIPPLEKV_MAP_FILE, "
                 "RIPPLEKV_MAP_VERSION, RIPPLEKV_MODEL_HASH, RIPPLEKV_ROLLOUT_ID, "
                 "RIPPLEKV_NODE_ID); a non-zero exit is reported as a failure");
  app.add_option("--apply-timeout", apply_timeout_s,
                 "Seconds the apply command may run before it is killed")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--write-log", options.write_log_path,
                 "Append one JSON line per write or removal to this file");
  v1::ClientSecurityFiles security;
  v1::AddClientSecurityFlags(&app, security);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  StatusOr<method::BudgetFormat> parsed_format = method::ParseBudgetFormat(format);
  if (!parsed_format.ok()) return Fail(parsed_format.status());
  options.format = *parsed_format;
  options.apply_timeout =
      std::chrono::milliseconds(std::max<int64_t>(1, std::llround(apply_timeout_s * 1000)));
  // The hook may change directory; it gets FILE's absolute path.
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(options.map_path, error);
  if (error) {
    return Fail(absl::InvalidArgumentError(options.map_path + ": " + error.message()));
  }
  options.map_path = absolute.lexically_normal().string();
  if (Status valid = ValidateAgentOptions(options); !valid.ok()) return Fail(valid);

  v1::ClientChannelOptions channel_options;
  if (Status loaded = v1::LoadClientSecurity(security, channel_options); !loaded.ok()) {
    return Fail(loaded);
  }
  channel_options.keepalive_without_calls = true;  // the stream idles between assignments
  options.plaintext = v1::IsPlaintext(channel_options);
  StatusOr<std::unique_ptr<Agent>> agent =
      Agent::Create(options, v1::MakeClientChannel(scheduler, channel_options));
  if (!agent.ok()) return Fail(agent.status());

  // SIGTERM / SIGINT: Stop() runs on a normal thread, outside the handler.
  StatusOr<std::unique_ptr<StopSignals>> signals = StopSignals::Start([&agent] {
    spdlog::info("signal: stopping");
    (*agent)->Stop();
  });
  if (!signals.ok()) return Fail(signals.status());

  spdlog::info("ripplekv-agent: node {}, model {}, scheduler {}, file {} ({})", options.node_id,
               options.model_hash, scheduler, options.map_path, format);
  const Status s = (*agent)->Run();
  signals->reset();
  if (!s.ok()) {
    spdlog::error("ripplekv-agent: exiting: {}", s.ToString());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace ripplekv::agent

int main(int argc, char** argv) { return ripplekv::agent::Main(argc, argv); }
