#include "scheduler/service/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "scheduler/service/convert.h"
#include "scheduler/service/scheduler_metrics.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr const char* kServices[] = {"ripplekv.v1.CalibrationService", "ripplekv.v1.WorkerService",
                                     "ripplekv.v1.RolloutService", "ripplekv.v1.AdminService"};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const SchedulerServerOptions& options) {
  if (options.db_path.empty()) return absl::InvalidArgumentError("db_path is required");
  if (options.lease_ms <= 0 || options.heartbeat_timeout_ms <= 0 ||
      options.heartbeat_interval_ms <= 0 || options.expire_interval_ms <= 0 ||
      options.retention_interval_ms <= 0 || options.watch_poll_ms <= 0 ||
      options.rollout_tick_ms <= 0) {
    return absl::InvalidArgumentError(
        "lease, heartbeat, expiry, retention, poll and rollout periods must be > 0 ms");
  }
  if (options.task_deadline_ms < 0 || options.retention_ms < 0 ||
      options.pending_job_ttl_ms < 0) {
    return absl::InvalidArgumentError(
        "task_deadline_ms, retention_ms and pending_job_ttl_ms must be >= 0");
  }
  if (options.max_attempts < 1) return absl::InvalidArgumentError("max_attempts must be >= 1");
  if (options.heartbeat_interval_ms >= options.heartbeat_timeout_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat_timeout_ms: ", options.heartbeat_timeout_ms,
                     " must exceed the heartbeat interval ", options.heartbeat_interval_ms));
  }
  // Before the store: a bad certificate or token file must not leave a database behind.
  ASSIGN_OR_RETURN(ServerSecurity security, MakeServerSecurity(options.security, options.listen));
  ASSIGN_OR_RETURN(std::vector<std::string> checkpoint_roots,
                   PrepareCheckpointRoots(options.checkpoint_dirs));
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  server->tokens_ = security.tokens;
  server->metrics_ = std::make_unique<telemetry::MetricsRegistry>();
  telemetry::AddBuildInfo(*server->metrics_, "scheduler");
  store::StoreOptions store_options;
  store_options.sync_writes = options.sync_writes;
  store_options.accept_wal_loss = options.accept_wal_loss;
  store_options.write_observer =
      [latency = &server->metrics_->GetHistogram(
           "ripplekv_scheduler_store_write_latency_seconds",
           "Duration of one RocksDB write (a batch) or write-ahead-log sync, seconds.",
           telemetry::StoreWriteBuckets())](double seconds) { latency->Observe(seconds); };
  store_options.memtable_bytes = options.store_memtable_bytes;
  store_options.block_cache_bytes = options.store_block_cache_bytes;
  store_options.log = [](bool error, std::string_view line) {
    if (error) {
      spdlog::error("rocksdb: {}", line);
    } else {
      spdlog::warn("rocksdb: {}", line);
    }
  };
  ASSIGN_OR_RETURN(server->store_,
                   store::RecoveringStore::Open({.path = options.db_path,
                                                 .store = store_options,
                                                 .min_free_bytes = options.store_min_free_bytes}));
  server->on_store_lost_ = options.on_store_lost;
  server->store_reopen_attempts_ = options.store_reopen_attempts;
  server->store_writable_ = &server->metrics_->GetGauge(
      "ripplekv_scheduler_store_writable",
      "1 while the database accepts writes; 0 after a failed write (a full disk) until it is "
      "reopened.");
  server->store_writable_->Set(1);
  server->store_write_failures_ = &server->metrics_->GetCounter(
      "ripplekv_scheduler_store_write_failures_total",
      "Times the database stopped accepting writes (a full disk, an I/O error).");
  server->store_reopens_ = &server->metrics_->GetCounter(
      "ripplekv_scheduler_store_reopens_total",
      "Times the database was reopened to recover from a failed write.");
  if (server->store_->RecoveredLeases() > 0) {
    spdlog::info("recovered {} leased tasks to pending", server->store_->RecoveredLeases());
  }
  // What the open dropped (a torn log tail, an accepted loss) or raised (an id counter).
  for (const std::string& note : server->store_->RecoveryNotes()) spdlog::warn("store: {}", note);
  SchedulerOptions scheduler_options;
  scheduler_options.lease_duration_ms = options.lease_ms;
  scheduler_options.heartbeat_timeout_ms = options.heartbeat_timeout_ms;
  scheduler_options.task_deadline_ms = options.task_deadline_ms;
  scheduler_options.max_attempts = options.max_attempts;
  scheduler_options.faults = options.faults;
  scheduler_options.max_pending_inline_bytes = options.max_pending_inline_bytes;
  scheduler_options.pending_job_ttl_ms = options.pending_job_ttl_ms;
  scheduler_options.metrics = server->metrics_.get();
  server->scheduler_ = std::make_unique<Scheduler>(server->store_.get(), scheduler_options, &NowMs);
  ASSIGN_OR_RETURN(server->rollout_engine_,
                   rollout::RolloutEngine::Load(server->store_.get(), {.now_ms = &NowMs}));

  server->pool_ = std::make_unique<WorkPool>(options.work_threads, options.max_queued_requests);
  WorkerServiceOptions worker_options;
  worker_options.pool = server->pool_.get();
  worker_options.heartbeat_interval_ms = options.heartbeat_interval_ms;
  worker_options.lease_timeout_ms = options.heartbeat_timeout_ms;
  server->worker_service_ =
      std::make_unique<WorkerServiceImpl>(server->scheduler_.get(), worker_options);
  CalibrationServiceOptions calibration_options;
  calibration_options.pool = server->pool_.get();
  calibration_options.watch.poll_ms = options.watch_poll_ms;
  calibration_options.watch.max_streams = options.max_watchers;
  WorkerServiceImpl* workers = server->worker_service_.get();
  calibration_options.on_cancelled = [workers] { workers->DeliverEvents(); };
  server->calibration_service_ = std::make_unique<CalibrationServiceImpl>(
      server->scheduler_.get(), std::move(calibration_options));

  server->rollout_service_ = std::make_unique<RolloutServiceImpl>(
      RolloutServiceOptions{.scheduler = server->scheduler_.get(),
                            .store = server->store_.get(),
                            .engine = server->rollout_engine_.get(),
                            .pool = server->pool_.get(),
                            .tokens = server->tokens_.get()});
  server->admin_service_ = std::make_unique<AdminServiceImpl>(
      AdminServiceOptions{.store = server->store_.get(),
                          .scheduler = server->scheduler_.get(),
                          .pool = server->pool_.get(),
                          .checkpoint_roots = std::move(checkpoint_roots)});

  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, security.credentials, &server->port_);
  builder.RegisterService(server->calibration_service_.get());
  builder.RegisterService(server->worker_service_.get());
  builder.RegisterService(server->rollout_service_.get());
  builder.RegisterService(server->admin_service_.get());
  // The largest SubmitJob; every other method checks kMaxRequestBytes itself (docs/API.md).
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxSubmitBytes));
  // Bounds what clients can make the server hold: streams per connection, and the memory of
  // gRPC's buffers (beyond it new calls wait or fail with RESOURCE_EXHAUSTED).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  grpc::ResourceQuota quota("ripplekv-scheduler");
  quota.Resize(options.max_buffer_bytes);
  builder.SetResourceQuota(quota);
  // Keepalive (docs/API.md "Deadlines, keepalive, sizes").
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  spdlog::info("serving {} ({})", options.listen, security.description);
  if (!options.health_listen.empty()) {
    // No service of ours: the builder adds only the default health service.
    grpc::ServerBuilder health_builder;
    health_builder.AddListeningPort(options.health_listen, grpc::InsecureServerCredentials(),
                                    &server->health_port_);
    health_builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 16);
    server->health_server_ = health_builder.BuildAndStart();
    if (server->health_server_ == nullptr || server->health_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options.health_listen, " (--health-listen)"));
    }
    spdlog::info("health on {} (port {}, plaintext, grpc.health.v1.Health only)",
                 options.health_listen, server->health_port_);
  }
  server->SetServing(true);
  AddSchedulerCollectors(*server->metrics_, {.store = server->store_.get(),
                                             .scheduler = server->scheduler_.get(),
                                             .rollouts = server->rollout_engine_.get(),
                                             .db_path = options.db_path});
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(server->metrics_server_, telemetry::MetricsServer::Start(
                                                  options.metrics_listen, server->metrics_.get()));
    spdlog::info("metrics on {} (port {}), path /metrics", options.metrics_listen,
                 server->metrics_server_->port());
  }
  server->timer_ =
      std::thread(&SchedulerServer::TimerLoop, server.get(), options.expire_interval_ms);
  server->rollout_timer_ =
      std::thread(&SchedulerServer::RolloutLoop, server.get(), options.rollout_tick_ms);
  if (options.retention_ms > 0) {
    server->retention_ = std::thread(&SchedulerServer::RetentionLoop, server.get(),
                                     options.retention_ms, options.retention_interval_ms);
  }
  return server;
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

void SchedulerServer::TimerLoop(int64_t interval_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  while (
      !cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stopping_; })) {
    lock.unlock();
    WatchStore();
    worker_service_->Tick();
    lock.lock();
  }
}

void SchedulerServer::WatchStore() {
  StoreWatch& watch = store_watch_;
  if (watch.lost) return;
  if (!watch.failed) {
    const std::optional<store::WriteFailure> failure = store_->write_failure();
    if (!failure) return;
    watch = StoreWatch{.failed = true, .failed_at_ms = NowMs()};
    store_writable_->Set(0);
    store_write_failures_->Add();
    SetServing(false);
    spdlog::error(
        "store: a write failed ({}); changes are refused ({}), reads go on, health is "
        "NOT_SERVING; the database is reopened once its disk has room (docs/OPERATIONS.md, "
        "\"A full disk\")",
        failure->detail, failure->status.ToString());
  }
  const Status recovered = store_->TryRecover();
  if (recovered.ok()) {
    spdlog::info("store: writable again after {:.1f} s (database reopened); serving",
                 static_cast<double>(NowMs() - watch.failed_at_ms) / 1000.0);
    for (const std::string& note : store_->RecoveryNotes()) spdlog::warn("store: {}", note);
    watch = StoreWatch{};
    store_writable_->Set(1);
    store_reopens_->Add();
    scheduler_->StoreReopened();
    SetServing(true);
    worker_service_->RefillWorkers({});
    return;
  }
  if (absl::IsResourceExhausted(recovered)) return;  // still no room: wait, as logged
  ++watch.reopen_failures;
  spdlog::error("store: reopening failed ({} of {}): {}", watch.reopen_failures,
                store_reopen_attempts_, recovered.ToString());
  if (watch.reopen_failures >= store_reopen_attempts_ && on_store_lost_) {
    watch.lost = true;
    spdlog::critical("store: cannot be reopened; shutting down for a restart");
    on_store_lost_();
  }
}

void SchedulerServer::RolloutLoop(int64_t interval_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  while (
      !cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stopping_; })) {
    lock.unlock();
    // A stage change is a write: rollouts wait while the store cannot write (WatchStore).
    if (!store_->write_failure()) rollout_engine_->Tick();
    lock.lock();
  }
}

void SchedulerServer::RetentionLoop(int64_t retention_ms, int64_t interval_ms) {
  constexpr size_t kJobsPerCall = 100;  // bounds one write and one compaction
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    uint64_t purged = 0;
    bool more = true;
    while (more) {
      StatusOr<store::PurgeOutcome> outcome =
          store_->PurgeFinishedJobs(NowMs() - retention_ms, kJobsPerCall);
      if (!outcome.ok()) {
        spdlog::error("retention: {}", outcome.status().ToString());
        break;
      }
      purged += outcome->purged;
      more = outcome->more;
      std::lock_guard<std::mutex> check(mu_);
      if (stopping_) break;
    }
    if (purged > 0) spdlog::info("retention: purged the tasks and results of {} jobs", purged);
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stopping_; });
  }
}

void SchedulerServer::SetServing(bool serving) {
  for (grpc::Server* s : {server_.get(), health_server_.get()}) {
    grpc::HealthCheckServiceInterface* health = s ? s->GetHealthCheckService() : nullptr;
    if (health == nullptr) continue;
    health->SetServingStatus(serving);
    for (const char* service : kServices) health->SetServingStatus(service, serving);
  }
}

void SchedulerServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  SetServing(false);
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  if (timer_.joinable()) timer_.join();
  if (retention_.joinable()) retention_.join();
  if (rollout_timer_.joinable()) rollout_timer_.join();
  if (calibration_service_ != nullptr) calibration_service_->Shutdown();
  if (rollout_service_ != nullptr) rollout_service_->Shutdown();
  if (worker_service_ != nullptr) worker_service_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  // Last to go: probes see NOT_SERVING while the main port drains.
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
  }
  pool_.reset();  // runs what is still queued (streams' last messages), then joins
  // Completions still queued are written; their callbacks use the worker service.
  if (scheduler_ != nullptr) scheduler_->StopCompletions();
  if (scheduler_ != nullptr) {
    const CompletionCommitter::Counts commits = scheduler_->CommitCounts();
    spdlog::info("{} task completions in {} store writes", commits.completions, commits.writes);
  }
}

}  // namespace ripplekv::scheduler::service
