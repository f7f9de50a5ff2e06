#pragma once
// The scheduler daemon's server (docs/DESIGN.md §3, docs/API.md): opens the store, builds the
// scheduler core and the rollout engine, serves CalibrationService, WorkerService,
// RolloutService (docs/ROLLOUTS.md) and AdminService with the health service (and
// reflection when asked) on one address, secured as docs/SECURITY.md describes, with the
// documented keepalive settings, and runs a timer that calls Scheduler::ExpireLeases.
// `ripplekv-scheduler` (main.cc) and the integration tests use it.
//
// Thread-safety: Shutdown() may be called from any thread, once or more.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/rollout/rollout_engine.h"
#include "scheduler/service/admin_service.h"
#include "scheduler/service/calibration_service.h"
#include "scheduler/service/rollout_service.h"
#include "scheduler/service/server_security.h"
#include "scheduler/service/worker_service.h"
#include "store/recovering_store.h"
#include "store/store.h"
#include "telemetry/metrics.h"
#include "telemetry/metrics_server.h"

namespace ripplekv::scheduler::service {

struct SchedulerServerOptions {
  std::string listen = "127.0.0.1:0";     // host:port; port 0 picks a free one (see port())
  std::string db_path;                    // RocksDB directory, created if missing; required
  int64_t lease_ms = 120'000;             // a lease's deadline, ms after leasing or a heartbeat
  int64_t heartbeat_timeout_ms = 30'000;  // a worker silent this long is dropped, ms
  int64_t heartbeat_interval_ms = 2'000;  // told to workers, ms
  int64_t expire_interval_ms = 1'000;     // how often the timer calls ExpireLeases, ms
  int64_t watch_poll_ms = 200;            // longest wait between looks at watched jobs, ms
  uint32_t max_watchers = 1'024;          // WatchJob streams open at once
  int max_streams_per_connection = 256;   // concurrent calls on one HTTP/2 connection
  size_t max_buffer_bytes = 1ull << 30;   // gRPC's buffers, all calls together (ResourceQuota)
  size_t work_threads = 8;                // threads doing the handlers' store work (WorkPool)
  size_t max_queued_requests = 1'024;  // unary requests waiting for them; more: RESOURCE_EXHAUSTED
  bool sync_writes = true;             // fsync every store change (store/store.h)
  // Open a database whose write-ahead log is damaged before its tail, dropping what follows the
  // damage (store::StoreOptions::accept_wal_loss; docs/OPERATIONS.md, "Corruption").
  bool accept_wal_loss = false;
  // The store's memtables (all column families together) and block cache, bytes
  // (store::StoreOptions; docs/OPERATIONS.md, "Memory").
  uint64_t store_memtable_bytes = 64ull << 20;
  uint64_t store_block_cache_bytes = 32ull << 20;
  // After a failed store write (a full disk), the store is reopened once the disk has this much
  // room (store::RecoveringStoreOptions::min_free_bytes; 0: derived). Reopens that fail for
  // another reason than space, this many in a row, end the process: on_store_lost runs.
  uint64_t store_min_free_bytes = 0;
  uint32_t store_reopen_attempts = 5;
  // Called once, from the timer thread, when the store cannot be made writable again (above):
  // `ripplekv-scheduler` then shuts down and exits 75 for its supervisor to restart it. Null:
  // the server keeps serving reads and retrying.
  std::function<void()> on_store_lost;
  int64_t task_deadline_ms = 0;        // SchedulerOptions::task_deadline_ms (0: derived)
  uint32_t max_attempts = 4;           // SchedulerOptions::max_attempts
  FaultOptions faults;                 // SchedulerOptions::faults (docs/SCHEDULER.md)
  // SchedulerOptions::max_pending_inline_bytes and pending_job_ttl_ms (docs/OPERATIONS.md,
  // "Memory"): inline data all pending jobs together may hold, bytes (0: no cap), and how long a
  // job may stay pending before it fails, ms (0: forever).
  uint64_t max_pending_inline_bytes = 1024ull << 20;
  int64_t pending_job_ttl_ms = 7 * 24 * 3600 * 1000LL;
  // Retention (docs/STORE.md, "Retention"): the tasks, results and inline data of jobs final for
  // longer than this are deleted (the job records, profiles and budget maps stay), checked every
  // retention_interval_ms on a thread of its own; 0 keeps everything forever.
  int64_t retention_ms = 7 * 24 * 3600 * 1000LL;
  int64_t retention_interval_ms = 60'000;
  // TLS and tokens (server_security.h). The default, plaintext without tokens, serves loopback
  // only; `ripplekv-scheduler` makes its operator choose explicitly.
  ServerSecurityOptions security;
  // Directories AdminService.CreateCheckpoint may write under (created 0700 when missing;
  // admin_service.h); empty: online checkpoints are refused (docs/OPERATIONS.md).
  std::vector<std::string> checkpoint_dirs;
  bool reflection = false;  // serve gRPC server reflection (process-wide once enabled)
  // How often rollouts check soak times and stage deadlines, ms (docs/ROLLOUTS.md).
  int64_t rollout_tick_ms = 100;
  // Prometheus metrics over plain HTTP on this host:port (docs/OPERATIONS.md); "": none.
  std::string metrics_listen;
  // A second, plaintext port serving only grpc.health.v1.Health (no token), for probes that
  // cannot speak TLS, such as Kubernetes' native gRPC probes (docs/SECURITY.md); "": none. It
  // reports what the main port's health service reports.
  std::string health_listen;
};

class SchedulerServer {
 public:
  // Opens the store and starts serving. Errors: InvalidArgument (no db_path, bad durations,
  // plaintext on a non-loopback address, bad security files; MakeServerSecurity),
  // FailedPrecondition (a token file others may read; MakeServerSecurity), those of
  // PrepareCheckpointRoots (a bad checkpoint_dirs entry), the store's errors (Unavailable when
  // another process holds the database), Unavailable when the address cannot be bound.
  [[nodiscard]] static StatusOr<std::unique_ptr<SchedulerServer>> Start(
      const SchedulerServerOptions& options);

  ~SchedulerServer();
  SchedulerServer(const SchedulerServer&) = delete;
  SchedulerServer& operator=(const SchedulerServer&) = delete;

  // The bound port (useful with port 0).
  int port() const { return port_; }
  // The metrics endpoint's bound port; 0 without metrics_listen.
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  // The health-only port; 0 without health_listen.
  int health_port() const { return health_port_; }
  // Every metric of this server (scraped through metrics_listen, readable in tests).
  const telemetry::MetricsRegistry& metrics() const { return *metrics_; }

  // Health NOT_SERVING first, then stops the timer, ends the streams (UNAVAILABLE) and stops
  // the server, giving unary calls in flight up to 2 s. Idempotent.
  void Shutdown();

  Scheduler& scheduler() { return *scheduler_; }
  WorkerServiceImpl& worker_service() { return *worker_service_; }
  rollout::RolloutEngine& rollout_engine() { return *rollout_engine_; }
  // WatchJob streams open now.
  size_t open_watchers() const { return calibration_service_->open_watchers(); }

  // The accepted tokens (null without a token file), e.g. for auth.h's CallerOf in handlers.
  const TokenTable* tokens() const { return tokens_.get(); }

 private:
  SchedulerServer() = default;
  void TimerLoop(int64_t interval_ms);
  // Once per timer tick: notices a failed store write (health NOT_SERVING, logged once, metric),
  // tries to reopen the store, and when it is writable again serves again (docs/OPERATIONS.md,
  // "A full disk").
  void WatchStore();
  void RolloutLoop(int64_t interval_ms);
  // Purges what retention_ms lets go, in bounded calls, until nothing is left or stopping.
  void RetentionLoop(int64_t retention_ms, int64_t interval_ms);
  // Sets the status of the whole server and of each service, on both health services.
  void SetServing(bool serving);

  // First: the store's write observer and the scheduler count into it until they are gone.
  std::unique_ptr<telemetry::MetricsRegistry> metrics_;
  std::unique_ptr<store::RecoveringStore> store_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<rollout::RolloutEngine> rollout_engine_;
  std::unique_ptr<WorkPool> pool_;  // the handlers' store work; drained by Shutdown
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<CalibrationServiceImpl> calibration_service_;
  std::unique_ptr<RolloutServiceImpl> rollout_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::shared_ptr<const TokenTable> tokens_;
  std::unique_ptr<telemetry::MetricsServer> metrics_server_;  // stopped by Shutdown
  std::unique_ptr<grpc::Server> health_server_;               // health_listen; may be null
  std::unique_ptr<grpc::Server> server_;                      // last: destroyed first
  int port_ = 0;
  int health_port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  // The store's write state as WatchStore last saw it; timer thread only.
  struct StoreWatch {
    bool failed = false;
    int64_t failed_at_ms = 0;
    uint32_t reopen_failures = 0;  // in a row, for another reason than space
    bool lost = false;             // on_store_lost was called
  } store_watch_;
  std::function<void()> on_store_lost_;
  uint64_t store_reopen_attempts_ = 0;
  telemetry::Gauge* store_writable_ = nullptr;
  telemetry::Counter* store_write_failures_ = nullptr;
  telemetry::Counter* store_reopens_ = nullptr;
  std::thread timer_;
  std::thread retention_;
  std::thread rollout_timer_;
};

}  // namespace ripplekv::scheduler::service
