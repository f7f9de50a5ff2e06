// ripplekv-scheduler: the calibration scheduler daemon (docs/DESIGN.md §3, docs/API.md).
//
//   ripplekv-scheduler --listen ADDR --db PATH (--tls-cert F --tls-key F [--tls-client-ca F] |
//     --insecure) [--token-file F] [--reflection] [--lease-ms N] [--heartbeat-timeout-ms N]
//     [--task-deadline-ms N] [--max-attempts N] [--max-watchers N] [--retention-ms N]
//     [--max-pending-inline-mib N] [--pending-job-ttl-ms N]
//     [--metrics-listen ADDR] [--health-listen ADDR] [--log-format text|json]
//     [--checkpoint-dir DIR]... [--allow-insecure-token-file] [--accept-wal-loss]
//   ripplekv-scheduler --db PATH --checkpoint DIR [--accept-wal-loss]
//
// Serves ripplekv.v1.CalibrationService, WorkerService, RolloutService and AdminService and the
// gRPC health service (server reflection only with --reflection) on ADDR, with its state in the
// RocksDB database at PATH. Security (docs/SECURITY.md): TLS with --tls-cert/--tls-key (client
// certificates required when --tls-client-ca is given), or plaintext with --insecure on a loopback
// address only; one of the two must be chosen. --token-file: every call needs a bearer token whose
// role may make it; a token file others may read (any mode beyond 0600, or 0640 owned by root)
// stops the start (exit 1) unless --allow-insecure-token-file, which only warns; a TLS key file
// others may read is a warning.
// --checkpoint-dir DIR (repeatable): `ripplekv admin checkpoint` writes only to new directories
// under these (created 0700 if missing; a relative checkpoint path is taken under the first);
// without one, online checkpoints are refused (FAILED_PRECONDITION). The process runs with
// umask 077: the database and checkpoints are private to the scheduler's user (0700 / 0600).
// --health-listen ADDR: a second port, always plaintext, serving only the health service (for
// Kubernetes' gRPC probes); --metrics-listen ADDR: Prometheus metrics (docs/OPERATIONS.md).
// Logs go to stderr; the bound address is logged once serving. SIGTERM / SIGINT: health goes
// NOT_SERVING, streams end with UNAVAILABLE, the server stops and the process exits 0. Exit codes:
// 0 after a clean shutdown, 1 when it cannot start (message on stderr), 2 on bad flags, 75 when
// the database failed a write and could not be reopened (after --store-min-free-mib of room,
// five reopens failed for another reason than space): a supervisor restarts it.
// A full disk (docs/OPERATIONS.md): changes get RESOURCE_EXHAUSTED, reads go on, health is
// NOT_SERVING, and the database is reopened by itself once the disk has room again.
// --memory-budget-mib N: gRPC's buffers N/2, RocksDB's memtables N/16 and block cache N/32.
// --max-pending-inline-mib N: a submit that would make pending jobs hold more inline data gets
// RESOURCE_EXHAUSTED; --pending-job-ttl-ms N: a job pending that long fails (docs/OPERATIONS.md).
// A damaged database (docs/OPERATIONS.md, "Corruption"): a torn last record of the write-ahead
// log is dropped and logged (file, offset, bytes); damage before the log's tail, a damaged table
// file or MANIFEST makes the start exit 1 with DATA_LOSS naming the file (and the offset).
// --accept-wal-loss: start anyway on a log damaged before its tail, dropping every change after
// the damage; what was dropped is logged, and no job or rollout id is handed out twice.
//
// --checkpoint DIR: instead of serving, writes a checkpoint of the (existing) database at PATH to
// the new directory DIR (docs/STORE.md, "Backup and restore"), prints "checkpoint DIR BYTES bytes"
// on stdout and exits 0; 1 when it cannot (the database is held by a running scheduler: use
// `ripplekv admin checkpoint` against it instead; DIR exists; no database at PATH).

#include <grpcpp/grpcpp.h>

#include <malloc.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "base/stop_signals.h"
#include "base/version.h"
#include "scheduler/service/scheduler_server.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"

namespace {

// The database failed a write and could not be reopened (docs/OPERATIONS.md, "A full disk"):
// EX_TEMPFAIL, for a supervisor to restart the process.
constexpr int kExitStoreLost = 75;

// --checkpoint: the offline backup of a database no scheduler holds.
int WriteCheckpoint(const std::string& db_path, const std::string& dir, bool accept_wal_loss) {
  ripplekv::store::StoreOptions store_options;
  store_options.create_if_missing = false;
  store_options.accept_wal_loss = accept_wal_loss;
  auto store = ripplekv::store::OpenStore(db_path, store_options);
  if (!store.ok()) {
    if (store.status().code() == absl::StatusCode::kUnavailable) {
      std::fprintf(stderr,
                   "ripplekv-scheduler: error: another process holds the database %s (a running "
                   "scheduler? checkpoint it online with `ripplekv admin checkpoint`)\n",
                   db_path.c_str());
    } else {
      std::fprintf(stderr, "ripplekv-scheduler: error: %s\n",
                   std::string(store.status().message()).c_str());
    }
    return 1;
  }
  for (const std::string& note : (*store)->RecoveryNotes()) {
    std::fprintf(stderr, "ripplekv-scheduler: store: %s\n", note.c_str());
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
  auto info = (*store)->Checkpoint(ec ? dir : absolute.string());
  if (!info.ok()) {
    std::fprintf(stderr, "ripplekv-scheduler: error: %s\n",
                 std::string(info.status().message()).c_str());
    return 1;
  }
  std::printf("checkpoint %s %llu bytes\n", info->dir.c_str(),
              static_cast<unsigned long long>(info->bytes));
  return 0;
}

int Run(int argc, char** argv) {
#ifdef __GLIBC__
  // Buffers of 1 MiB and more (a submit's inline data and its copies on the way to the store) are
  // mapped for each use and unmapped when freed. Otherwise glibc raises its mmap threshold after
  // the first such free and serves the next ones from per-thread arenas that keep the memory: 20
  // pending jobs of 31 MiB kept 1.6 GiB resident (docs/PERFORMANCE.md).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  // The database, its checkpoints (hard links of its table files) and anything else this process
  // creates are private to its user: 0700 directories, 0600 files.
  ::umask(077);
  ripplekv::scheduler::service::SchedulerServerOptions options;
  options.listen.clear();
  CLI::App app{"ripplekv-scheduler: the distributed calibration scheduler"};
  app.set_version_flag("--version", [] {
    return ripplekv::VersionText(
        "ripplekv-scheduler",
        {{"grpc", grpc::Version()}, {"rocksdb", ripplekv::store::RocksDbVersion()}});
  });
  app.add_option("--listen", options.listen,
                 "address to serve on, host:port (required unless --checkpoint)");
  app.add_option("--db", options.db_path, "RocksDB directory (created if missing)")->required();
  std::string checkpoint_dir;
  app.add_option("--checkpoint", checkpoint_dir,
                 "write a checkpoint of the database to this new directory and exit, without "
                 "serving (docs/STORE.md, \"Backup and restore\")");
  app.add_option("--lease-ms", options.lease_ms, "task lease duration, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-timeout-ms", options.heartbeat_timeout_ms,
                 "a worker silent this long is dropped and loses its leases, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--task-deadline-ms", options.task_deadline_ms,
                 "longest one lease of a task may last however often its worker heartbeats, ms; "
                 "0: derived from the job's size and the model")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--retention-ms", options.retention_ms,
                 "delete the tasks, results and inline data of jobs final for longer than this, "
                 "ms (job records, profiles and budget maps stay); 0: keep everything")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  uint64_t memory_budget_mib = 2048;
  app.add_option("--memory-budget-mib", memory_budget_mib,
                 "memory for gRPC's buffers (half), RocksDB's memtables (1/16) and block cache "
                 "(1/32), MiB (docs/OPERATIONS.md, \"Memory\")")
      ->capture_default_str()
      ->check(CLI::Range(64, 1 << 20));
  uint64_t store_min_free_mib = 0;
  app.add_option("--store-min-free-mib", store_min_free_mib,
                 "after a failed write (a full disk), reopen the database once its disk has this "
                 "much room, MiB; 0: one memtable (docs/OPERATIONS.md, \"A full disk\")")
      ->capture_default_str();
  uint64_t max_pending_inline_mib = options.max_pending_inline_bytes >> 20;
  app.add_option("--max-pending-inline-mib", max_pending_inline_mib,
                 "inline calibration data all pending jobs together may hold, MiB; a submit past "
                 "it gets RESOURCE_EXHAUSTED; 0: no cap (docs/OPERATIONS.md, \"Memory\")")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pending-job-ttl-ms", options.pending_job_ttl_ms,
                 "a job still pending (no task leased) this long after submission fails, ms; "
                 "0: jobs wait forever")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-watchers", options.max_watchers,
                 "WatchJob streams open at once; more get RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-attempts", options.max_attempts,
                 "failed attempts of one task (deadline passed, worker lost, invalid results) "
                 "that fail its job")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Faulty workers and verified results (docs/SCHEDULER.md, "Faulty workers").
  ripplekv::scheduler::FaultOptions& faults = options.faults;
  app.add_option("--quarantine-failures", faults.quarantine_failures,
                 "failed attempts charged to one worker within --quarantine-window-ms that "
                 "quarantine it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--quarantine-window-ms", faults.quarantine_window_ms,
                 "the window of --quarantine-failures, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--quarantine-ms", faults.quarantine_ms,
                 "how long a quarantine lasts unless an admin lifts it, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--exclusion-grace-ms", faults.exclusion_grace_ms,
                 "a task a worker failed goes back to that worker only after this long, and only "
                 "when no other worker can take it, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--job-wait-ms", faults.job_wait_ms,
                 "a job stalled by faulty workers (all quarantined, an undecided disagreement) "
                 "this long fails, ms; 0: waits forever")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--verify-default", faults.default_verify_fraction,
                 "fraction of a job's tasks verified on a second worker when the job gives none")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--verify-wait-ms", faults.verify_wait_ms,
                 "how long a task selected for verification waits for a second worker before it "
                 "completes unverified, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--verify-key", faults.verify_key,
                 "key of the verification sample (for reproducible tests); 0: random at start")
      ->capture_default_str();
  app.add_option("--live-session-ms", faults.live_session_ms,
                 "a registration of a worker id heard from within this long is refused unless "
                 "it asks to replace the session, ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  ripplekv::scheduler::service::ServerSecurityOptions& security = options.security;
  bool insecure = false;
  app.add_option("--tls-cert", security.tls_cert_file, "PEM server certificate chain (TLS)");
  app.add_option("--tls-key", security.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", security.tls_client_ca_file,
                 "PEM CA: require client certificates it signed (mTLS)");
  app.add_option("--token-file", security.token_file,
                 "Bearer tokens and their roles, one per line (docs/SECURITY.md); must be "
                 "private to its owner (chmod 600; root:GROUP 0640 also does)");
  app.add_flag("--allow-insecure-token-file", security.allow_insecure_token_file,
               "Serve even when others may read --token-file (a warning instead of exit 1)");
  app.add_option("--checkpoint-dir", options.checkpoint_dirs,
                 "directory `ripplekv admin checkpoint` may write under (repeatable; created 0700 "
                 "if missing; a relative checkpoint path goes under the first); none: online "
                 "checkpoints are refused (docs/OPERATIONS.md)");
  app.add_flag("--insecure", insecure, "Serve plaintext (loopback addresses only)");
  app.add_flag("--reflection", options.reflection, "Serve gRPC server reflection");
  app.add_flag("--accept-wal-loss", options.accept_wal_loss,
               "open a database whose write-ahead log is damaged before its tail anyway, "
               "dropping every change after the damage (logged); without it such a start exits 1 "
               "naming the log file and offset (docs/OPERATIONS.md, \"Corruption\")");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "serve Prometheus metrics over plain HTTP on host:port, path /metrics "
                 "(docs/OPERATIONS.md)");
  app.add_option("--health-listen", options.health_listen,
                 "also serve the gRPC health service alone, plaintext and without tokens, on "
                 "host:port (for probes that cannot speak TLS; docs/SECURITY.md)");
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "log lines on stderr: text or json (one object a line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.max_pending_inline_bytes = max_pending_inline_mib << 20;
  if (ripplekv::Status s = ripplekv::telemetry::ConfigureLogging("scheduler", log_format);
      !s.ok()) {
    std::fprintf(stderr, "ripplekv-scheduler: error: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (!checkpoint_dir.empty()) {
    return WriteCheckpoint(options.db_path, checkpoint_dir, options.accept_wal_loss);
  }
  if (options.listen.empty()) {
    std::fprintf(stderr, "ripplekv-scheduler: error: --listen is required (unless --checkpoint)\n");
    return 2;
  }
  const bool tls = !security.tls_cert_file.empty() || !security.tls_key_file.empty();
  if (!tls && !insecure) {
    std::fprintf(stderr,
                 "ripplekv-scheduler: error: pass --tls-cert and --tls-key to serve TLS, or "
                 "--insecure to serve plaintext on a loopback address\n");
    return 2;
  }
  if (tls && insecure) {
    std::fprintf(stderr,
                 "ripplekv-scheduler: error: --insecure and --tls-cert/--tls-key exclude "
                 "each other\n");
    return 2;
  }
  if (insecure && !ripplekv::scheduler::service::IsLoopbackAddress(options.listen)) {
    std::fprintf(stderr,
                 "ripplekv-scheduler: error: --insecure serves only loopback addresses "
                 "(127.0.0.1, [::1], localhost), not %s; use TLS\n",
                 options.listen.c_str());
    return 2;
  }
  if (security.token_file.empty()) {
    spdlog::warn("no --token-file: every client that can connect may call every RPC");
  }

  // Heartbeats several times per timeout, at most every 2 s (docs/API.md).
  options.heartbeat_interval_ms =
      std::max<int64_t>(1, std::min<int64_t>(2'000, options.heartbeat_timeout_ms / 3));

  options.max_buffer_bytes = (memory_budget_mib << 20) / 2;
  options.store_memtable_bytes = (memory_budget_mib << 20) / 16;
  options.store_block_cache_bytes = (memory_budget_mib << 20) / 32;
  options.store_min_free_bytes = store_min_free_mib << 20;

  // SIGTERM / SIGINT, or a store that cannot be reopened: this thread waits for one, then shuts
  // the server down.
  std::promise<void> stop;
  auto once = std::make_shared<std::once_flag>();
  auto stop_once = [&stop, once] { std::call_once(*once, [&stop] { stop.set_value(); }); };
  std::atomic<bool> store_lost{false};
  options.on_store_lost = [&store_lost, stop_once] {
    store_lost.store(true);
    stop_once();
  };
  auto signals = ripplekv::StopSignals::Start(stop_once);
  if (!signals.ok()) {
    spdlog::error("ripplekv-scheduler: {}", signals.status().ToString());
    return 1;
  }

  auto server = ripplekv::scheduler::service::SchedulerServer::Start(options);
  if (!server.ok()) {
    spdlog::error("ripplekv-scheduler: {}", server.status().ToString());
    return 1;
  }
  spdlog::info("ripplekv-scheduler serving on {} (port {}), database {}", options.listen,
               (*server)->port(), options.db_path);
  stop.get_future().wait();
  spdlog::info(store_lost.load() ? "store lost: shutting down (exit 75)" : "signal: shutting down");
  (*server)->Shutdown();
  server->reset();
  spdlog::info("stopped");
  return store_lost.load() ? kExitStoreLost : 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
