// Operator commands against a running scheduler:
//   ripplekv admin checkpoint --scheduler ADDR DIR [--json]
//     AdminService.CreateCheckpoint (admin role): writes a consistent checkpoint of the
//     scheduler's database to the new directory DIR on the scheduler's machine, which must lie
//     under one of the scheduler's --checkpoint-dir directories (a relative DIR is taken under the
//     first; docs/STORE.md, "Backup and restore"). stdout: "checkpoint DIR BYTES bytes" with DIR
//     as the scheduler resolved it; --json: the CreateCheckpointResponse.
//   ripplekv admin unquarantine --scheduler ADDR WORKER_ID [--json]
//     AdminService.LiftQuarantine (admin role): lifts the worker's quarantine before its
//     cool-down ends and forgets the failures charged to it (docs/SCHEDULER.md, "Faulty
//     workers"). stdout: "worker ID: quarantine lifted (was: REASON)"; --json: the
//     LiftQuarantineResponse. A worker that is not quarantined is NOT_FOUND (exit 2).
//   ripplekv health --scheduler ADDR [--service NAME] [--timeout-ms N]
//     grpc.health.v1.Health/Check (no token needed): stdout is the status, SERVING, NOT_SERVING
//     or UNKNOWN; exit 0 only for SERVING (1 otherwise), 3 when the scheduler cannot be reached
//     or does not answer within --timeout-ms, 2 for a service it does not know. For container
//     health checks and Kubernetes exec probes, with TLS as any client.
// All take the security flags of proto/client_security_flags.h. Errors: one line
// "ripplekv: error: ..." on stderr, a server's starting with its code. Exit codes:
// cli/exit_codes.h.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/remote_client.h"
#include "cli/rollout_view.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/client_channel.h"
#include "proto/client_security_flags.h"
#include "ripplekv/v1/admin.grpc.pb.h"

namespace ripplekv::cli {
namespace {

// A checkpoint flushes and links the database's files: seconds, more on a loaded disk.
constexpr std::chrono::minutes kCheckpointDeadline{10};

struct AdminArgs {
  std::string scheduler;
  v1::ClientSecurityFiles security;
  std::string dir;        // checkpoint
  std::string worker_id;  // unquarantine
  bool json = false;
  std::string service;        // health: empty = the server as a whole
  int64_t timeout_ms = 5000;  // health
};

StatusOr<std::shared_ptr<grpc::Channel>> Channel(const AdminArgs& args) {
  v1::ClientChannelOptions options;
  RETURN_IF_ERROR(v1::LoadClientSecurity(args.security, options));
  return v1::MakeClientChannel(args.scheduler, options);
}

int RunCheckpoint(const AdminArgs& args) {
  StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(args);
  if (!channel.ok()) return ReportError(channel.status());
  std::unique_ptr<v1::AdminService::Stub> stub = v1::AdminService::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(context, kCheckpointDeadline);
  v1::CreateCheckpointRequest request;
  request.set_dir(args.dir);
  v1::CreateCheckpointResponse response;
  const Status status =
      FromGrpc(stub->CreateCheckpoint(&context, request, &response), args.scheduler,
               args.security.tls_ca.empty());
  if (!status.ok()) return ReportError(ServerError(status));
  if (args.json) {
    std::printf("%s\n", ProtoToJson(response).c_str());
  } else {
    std::printf("checkpoint %s %llu bytes\n", response.dir().c_str(),
                static_cast<unsigned long long>(response.bytes()));
  }
  return kExitOk;
}

int RunUnquarantine(const AdminArgs& args) {
  if (args.worker_id.empty()) {
    return ReportError(absl::InvalidArgumentError("the worker id must not be empty"));
  }
  StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(args);
  if (!channel.ok()) return ReportError(channel.status());
  std::unique_ptr<v1::AdminService::Stub> stub = v1::AdminService::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(context, kUnaryDeadline);
  v1::LiftQuarantineRequest request;
  request.set_worker_id(args.worker_id);
  v1::LiftQuarantineResponse response;
  const Status status =
      FromGrpc(stub->LiftQuarantine(&context, request, &response), args.scheduler,
               args.security.tls_ca.empty());
  if (!status.ok()) return ReportError(ServerError(status));
  if (args.json) {
    std::printf("%s\n", ProtoToJson(response).c_str());
  } else {
    std::printf("worker %s: quarantine lifted (was: %s)\n", args.worker_id.c_str(),
                response.reason().c_str());
  }
  return kExitOk;
}

int RunHealth(const AdminArgs& args) {
  StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(args);
  if (!channel.ok()) return ReportError(channel.status());
  std::unique_ptr<grpc::health::v1::Health::Stub> stub =
      grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(context, std::chrono::milliseconds(args.timeout_ms));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args.service);
  grpc::health::v1::HealthCheckResponse response;
  const Status status = FromGrpc(stub->Check(&context, request, &response), args.scheduler,
                                 args.security.tls_ca.empty());
  if (!status.ok()) return ReportError(ServerError(status));
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      std::printf("SERVING\n");
      return kExitOk;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      std::printf("NOT_SERVING\n");
      return kExitFailure;
    default:
      std::printf("UNKNOWN\n");
      return kExitFailure;
  }
}

void AddConnectionFlags(CLI::App* cmd, AdminArgs& a) {
  cmd->add_option("--scheduler", a.scheduler, "Scheduler address host:port")->required();
  v1::AddClientSecurityFlags(cmd, a.security);
}

}  // namespace

void AddAdminCommands(CLI::App& app, Action& run) {
  CLI::App* admin = app.add_subcommand("admin", "Administer a running scheduler (admin role)");
  admin->require_subcommand(1);
  {
    auto a = std::make_shared<AdminArgs>();
    CLI::App* cmd = admin->add_subcommand(
        "checkpoint", "Write a consistent checkpoint of the scheduler's database (a backup)");
    AddConnectionFlags(cmd, *a);
    cmd->add_option("dir", a->dir,
                    "New directory for the checkpoint on the scheduler's machine, under one of its "
                    "--checkpoint-dir directories (relative: under the first)")
        ->required();
    cmd->add_flag("--json", a->json, "Print the CreateCheckpointResponse as JSON");
    cmd->footer(
        "stdout: \"checkpoint DIR BYTES bytes\". Restore: start a scheduler with --db DIR (or a "
        "copy of it).");
    cmd->callback([a, &run] { run = [a] { return RunCheckpoint(*a); }; });
  }
  {
    auto a = std::make_shared<AdminArgs>();
    CLI::App* cmd = admin->add_subcommand(
        "unquarantine",
        "Lift a worker's quarantine now and forget the failures charged to it (`ripplekv "
        "workers` lists quarantined workers)");
    AddConnectionFlags(cmd, *a);
    cmd->add_option("worker", a->worker_id, "Worker id, as `ripplekv workers` lists it")
        ->required();
    cmd->add_flag("--json", a->json, "Print the LiftQuarantineResponse as JSON");
    cmd->footer(
        "stdout: \"worker ID: quarantine lifted (was: REASON)\". A worker that is not "
        "quarantined is an error (NOT_FOUND, exit 2).");
    cmd->callback([a, &run] { run = [a] { return RunUnquarantine(*a); }; });
  }
}

void AddHealthCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<AdminArgs>();
  CLI::App* cmd =
      app.add_subcommand("health", "Ask a scheduler whether it is serving (gRPC health check)");
  AddConnectionFlags(cmd, *a);
  cmd->add_option("--service", a->service,
                  "Service to ask about, e.g. ripplekv.v1.CalibrationService (default: the "
                  "server as a whole)");
  cmd->add_option("--timeout-ms", a->timeout_ms, "Deadline of the check, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "stdout: SERVING, NOT_SERVING or UNKNOWN. Exit 0 only when SERVING; 1 not serving; 2 "
      "unknown service; 3 unreachable or no answer in time.");
  cmd->callback([a, &run] { run = [a] { return RunHealth(*a); }; });
}

}  // namespace ripplekv::cli
