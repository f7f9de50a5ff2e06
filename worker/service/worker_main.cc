// ripplekv-worker --scheduler ADDR --model PATH [--threads N] [--weights stored|f32]
// [--device cpu|cuda:N] [--device-weights bf16|f32] [--prefill-cache-mb M] [--memory-limit-mb M]
// [--id NAME | --state-dir DIR] [--replace] [--prefetch N] [--tp N] [--tls-ca F [--tls-cert F
// --tls-key F] [--tls-server-name N]] [--token-file F] [--data-dir DIR]... [--metrics-listen ADDR]
// [--log-format text|json]
//
// Identity (worker/service/worker_identity.h): without --id the worker registers as
// HOST-DEVICE-N ("myhost-cpu-0", "myhost-cuda-1-0"), N the lowest slot whose lock file in
// --state-dir (default $RIPPLEKV_HOME/worker, else $XDG_STATE_HOME/ripplekv, else
// ~/.local/state/ripplekv) it can lock for its whole life: unique per process on a host, and the
// same after a restart. A state directory it cannot use gives HOST-DEVICE-pidPID and a warning.
// The scheduler refuses a second live registration of an id; --replace takes the id over (a
// restart right after a crash, before the scheduler noticed the old session end).
//
// Security (docs/SECURITY.md): --tls-ca verifies the scheduler's TLS certificate (without it the
// worker speaks plaintext, which a scheduler serves on loopback only); --tls-cert/--tls-key
// present a client certificate (mTLS); --token-file holds the worker role's bearer token.
//
// Data directories (docs/DATA.md): a job whose calibration data is a path is read only when that
// path, resolved (symlinks, ".."), is a regular file inside one of the --data-dir directories
// (repeatable; each resolved once at start, a missing one is a startup error). Without --data-dir
// path data is refused. Refusals tell the scheduler (and so the job's clients) only a generic
// message; the reason goes to this worker's log. Inline and built-in data need no directory.
//
// Tensor parallelism (docs/DESIGN.md §3.2): `mpirun -np N*k ripplekv-worker --tp N ...` forms k
// workers of N ranks each (consecutive ranks); each rank holds its shard of the model, rank 0 of a
// group registers with the scheduler (as ID-gG when k > 1) and the others follow its task stream
// (worker/service/task_group.h). SIGTERM to mpirun reaches every rank: each group's rank 0 drains
// and dismisses its followers.
//
// Loads the model once, hashes it, registers with the scheduler and serves calibration tasks
// until SIGTERM or SIGINT, then drains (finishes the task in progress, sends its results, closes
// the stream). Exit codes: 0 drained normally, 1 a startup error (bad flag, model unreadable, the
// device not usable), 3 refused by the scheduler: its id is held by another live session (use a
// distinct --id, or --replace), it is quarantined (at registration or while connected), or its
// model summary differs from the one recorded for its hash. Restarting does not help with 3 until
// the cause is gone; a supervisor should back off or page. 4: a device fault (a CUDA kernel that
// faulted, a failed copy: kernels::DeviceFault): the task it ran failed and goes to another
// worker, queued tasks were handed back, and the process exits since its device context is
// unusable; a supervisor may restart it (a fresh process gets a fresh context) and should page if
// the same GPU faults again.
//
// Memory (docs/MEMORY.md): the process stays under --memory-limit-mb (default: physical memory, or
// the cgroup's limit when lower: worker/service/memory_limit.h).
// The prepared-sample cache gets min(--prefill-cache-mb, limit - weights - thread scratch -
// process - one task of calibrate's default shape), never negative; a job whose own estimate
// exceeds the limit is refused (REFUSAL_REASON_INSUFFICIENT_MEMORY) rather than run into the OOM
// killer.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/stop_signals.h"
#include "base/version.h"
#include "kernels/ops/cpu/openblas_version.h"
#include "kernels/ops/devices.h"
#include "proto/client_channel.h"
#include "proto/client_security_flags.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"
#include "telemetry/metrics_server.h"
#include "worker/calibration/calibration_run.h"
#include "worker/calibration/memory_estimate.h"
#include "worker/engine/open_engine.h"
#include "worker/model/model_hash.h"
#include "worker/model/model_loader.h"
#include "worker/service/memory_limit.h"
#include "worker/service/task_group.h"
#include "worker/service/task_runner.h"
#include "worker/service/worker_client.h"
#include "worker/service/worker_identity.h"
#include "worker/service/worker_metrics.h"
#include "worker/service/worker_numerics.h"

namespace ripplekv::worker {
namespace {

int Fail(const Status& s) {
  spdlog::error("{}", s.ToString());
  return 1;
}

// Exit code: the scheduler refused this worker (IsSchedulerRefusal).
constexpr int kExitRefused = 3;
// Exit code: a device fault (IsDeviceFaultEnd): the device is unusable for this process.
constexpr int kExitDeviceFault = 4;

int Main(int argc, char** argv) {
  CLI::App app{"RippleKV calibration worker"};
  app.set_version_flag("--version", [] {
    return VersionText("ripplekv-worker",
                       {{"grpc", grpc::Version()}, {"openblas", kernels::OpenBlasVersion()}});
  });
  std::string scheduler, model_path, id, state_dir;
  bool replace = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t cache_mb = 1024;
  bool no_compute = false;
  app.add_option("--scheduler", scheduler, "Scheduler address host:port")->required();
  app.add_option("--model", model_path, "GGUF file or Hugging Face directory")->required();
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024));
  std::string weights = "stored";
  app.add_option("--weights", weights,
                 "Weight matrices in memory: stored (as in the file) or f32 (expanded at load)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stored", "f32"}));
  std::string device = "cpu", device_weights = "bf16";
  app.add_option("--device", device, "Where tasks run: cpu, cuda (the first GPU) or cuda:N")
      ->capture_default_str();
  app.add_option("--device-weights", device_weights,
                 "Weights on a device: bf16 (GEMMs in bf16, fp32 accumulation) or f32 (exact fp32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "f32"}));
  int tp = 1;
  app.add_option("--tp", tp, "Tensor-parallel ranks per worker (under mpirun; CPU)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--prefill-cache-mb", cache_mb, "Prepared-sample cache limit, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  const MemoryLimit default_limit = DefaultMemoryLimit();
  int64_t memory_limit_mb = default_limit.bytes >> 20;
  app.add_option("--memory-limit-mb", memory_limit_mb,
                 "Memory limit of the whole process, MiB (default: physical memory, or the "
                 "cgroup's memory limit when lower, as in a container); jobs whose estimate "
                 "exceeds it are refused")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--id", id,
                 "Worker id at the scheduler (default: HOST-DEVICE-N, N a slot locked in "
                 "--state-dir: unique per process on a host, stable across restarts)");
  app.add_option("--state-dir", state_dir,
                 "Directory of the default id's lock files, created 0700 (default: "
                 "$RIPPLEKV_HOME/worker, else $XDG_STATE_HOME/ripplekv, else "
                 "~/.local/state/ripplekv)");
  app.add_flag("--replace", replace,
               "Take over the id from a session the scheduler still thinks is alive (e.g. right "
               "after a crash); without it a live session's id is refused and the worker exits 3");
  int prefetch = 1;
  app.add_option("--prefetch", prefetch,
                 "Tasks held queued beyond the running one, so the next is at hand when one ends")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxPrefetch));
  v1::ClientSecurityFiles security;
  v1::AddClientSecurityFlags(&app, security);
  std::vector<std::string> data_dirs;
  app.add_option("--data-dir", data_dirs,
                 "Directory whose files jobs may name as calibration data (repeatable; without "
                 "it, jobs with path data are refused; inline and built-in data always work)");
  std::string metrics_listen, log_format = "text";
  app.add_option("--metrics-listen", metrics_listen,
                 "Serve Prometheus metrics over plain HTTP on host:port, path /metrics "
                 "(docs/OPERATIONS.md; from when the model is loaded)");
  app.add_option("--log-format", log_format,
                 "Log lines on stderr: text or json (one object a line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--no-compute", no_compute,
               "Benchmark mode: report synthetic KL without running the model (never for real "
               "jobs; bench/scheduler_overhead.py)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (Status configured = telemetry::ConfigureLogging("worker", log_format); !configured.ok()) {
    return Fail(configured);
  }

  // SIGTERM / SIGINT drain the worker, on a normal thread outside the handler. A signal that
  // arrives before the client exists (while the model loads) drains it as soon as it does.
  std::mutex stop_mu;
  WorkerClient* draining_client = nullptr;  // guarded by stop_mu
  bool stop_requested = false;              // guarded by stop_mu
  StatusOr<std::unique_ptr<StopSignals>> signals = StopSignals::Start([&] {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop_requested = true;
    if (draining_client != nullptr) {
      spdlog::info("signal: draining");
      draining_client->RequestDrain();
    }
  });
  if (!signals.ok()) return Fail(signals.status());

  v1::ClientChannelOptions channel;
  if (Status loaded = v1::LoadClientSecurity(security, channel); !loaded.ok()) {
    return Fail(loaded);
  }
  // Before the model: a mistyped directory fails at once.
  auto dirs = DataDirs::Open(data_dirs);
  if (!dirs.ok()) return Fail(dirs.status());
  auto opened = OpenEngine(model_path, {.weights = weights,
                                         .device = device,
                                         .device_weights = device_weights,
                                         .tp = tp,
                                         .tp_layout = TpLayout::kWorkerGroups,
                                         .num_threads = threads});
  if (!opened.ok()) return Fail(opened.status());
  const Engine& engine = **opened;
  const TpGroup* group = engine.tp.get();
  if (group && group->groups > 1 && !id.empty()) id = absl::StrCat(id, "-g", group->group);
  if (group && group->rank != 0) {
    // A follower: runs rank 0's commands until dismissed (the model hash is rank 0's check).
    TaskRunner runner(*engine.transformer, engine.tokenizer.get(), "",
                      {.weights = engine.storage});
    TaskGroup follower(*group->commands);
    const Status followed = follower.Follow(runner);
    if (!followed.ok()) return Fail(followed);
    return 0;
  }
  // The registering rank's id; the lock (when one is taken) is held until the process ends.
  std::string id_device = kernels::DeviceSpecName(engine.device_spec);
  if (group && group->groups > 1) id_device = absl::StrCat(id_device, "-g", group->group);
  ChosenIdentity identity = ChooseWorkerIdentity(
      id, {.host = HostName(),
           .device = id_device,
           .state_dir = state_dir.empty() ? DefaultStateDir(StateDirEnvironment::FromProcess())
                                          : state_dir});
  if (!identity.fallback_reason.empty()) {
    spdlog::warn(
        "worker id {} ({}): the state directory is unusable, so the id will differ after a "
        "restart (give --id, or a writable --state-dir): {}",
        identity.identity.id(), identity.identity.source(), identity.fallback_reason);
  } else {
    spdlog::info("worker id {} ({})", identity.identity.id(), identity.identity.source());
  }
  id = identity.identity.id();
  auto hash = ModelHash(model_path);
  if (!hash.ok()) return Fail(hash.status());
  const ModelConfig& c = engine.model.config;
  spdlog::info("loaded {} ({}, {} layers) on {}, model hash {}", model_path, c.architecture,
               c.n_layers, kernels::DeviceSpecName(engine.device_spec), *hash);

  if (dirs->empty()) {
    spdlog::info("no --data-dir: jobs whose calibration data is a path are refused");
  } else {
    for (const std::string& d : dirs->dirs()) spdlog::info("data directory {}", d);
  }
  if (no_compute) spdlog::warn("--no-compute: trial results are synthetic (benchmark mode)");
  // Memory: what stays resident (weights, thread scratch, the process) and one task of
  // calibrate's default shape are reserved; the prepared-sample cache gets at most what remains.
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t limit_bytes = memory_limit_mb * kMiB;
  int64_t f32_load_mapped_bytes = 0;  // the file mapped while expanding (f32 only)
  if (engine.storage == WeightStorage::kF32) {
    auto summary = DescribeModel(model_path);
    if (!summary.ok()) return Fail(summary.status());
    f32_load_mapped_bytes = summary->stored_weight_bytes;
  }
  const MemoryEstimate reserve = EstimateCalibrationMemory(
      c, WeightBytes(engine.held()),
      {.threads = threads,
       .weights = engine.storage,
       .f32_load_mapped_bytes = f32_load_mapped_bytes});
  const int64_t cache_bytes =
      std::max<int64_t>(0, std::min(cache_mb * kMiB, limit_bytes - reserve.total_bytes()));
  spdlog::info(
      "memory limit {} ({}): estimate {} for one task of calibrate's default shape (C 512, W 32, "
      "T 2); prepared-sample cache {} (--prefill-cache-mb {})",
      FormatBytes(limit_bytes),
      app.count("--memory-limit-mb") > 0 ? std::string("--memory-limit-mb") : default_limit.source,
      DescribeEstimate(reserve), FormatBytes(cache_bytes), cache_mb);
  if (cache_bytes == 0) {
    spdlog::warn(
        "no memory left under the limit for the prepared-sample cache: every task "
        "prepares its sample again");
  }
  TaskRunner runner(*engine.transformer, engine.tokenizer.get(), *hash,
                    {.cache = {.max_bytes = cache_bytes},
                     .no_compute = no_compute,
                     .memory_limit_bytes = limit_bytes,
                     .weights = engine.storage,
                     .data_dirs = *dirs});
  std::unique_ptr<TaskGroup> leader;
  if (group) {
    leader = std::make_unique<TaskGroup>(*group->commands);
    runner.SetMirror(leader->Leader());
    spdlog::info("tensor-parallel group {} of {} ranks", id, tp);
  }
  WorkerClientOptions options;
  options.tensor_parallel = tp;
  options.device = kernels::DeviceSpecName(engine.device_spec);
  options.host = HostName();
  options.scheduler_address = scheduler;
  options.channel = channel;
  options.worker_id = id;
  options.replace = replace;
  options.numerics = WorkerNumerics(engine.device_spec.device, engine.device_weights, tp);
  spdlog::info("numerics {}", options.numerics);
  options.prefetch = prefetch;
  options.memory_limit_bytes = cache_bytes;
  options.device_fault = [] { return kernels::DeviceFault(); };
  options.memory = {.limit_bytes = limit_bytes,
                    .weight_bytes = reserve.weight_bytes,
                    .thread_scratch_bytes = reserve.thread_scratch_bytes,
                    .process_bytes = reserve.process_bytes + reserve.tokenizer_bytes};
  // As `ripplekv calibrate` describes it, so profiles agree.
  WorkerClient client(options, ProfileModelOf(c, *hash), &runner);
  telemetry::MetricsRegistry metrics;  // scraped only while metrics_server lives
  std::unique_ptr<telemetry::MetricsServer> metrics_server;
  if (!metrics_listen.empty()) {
    telemetry::AddBuildInfo(metrics, "worker");
    AddWorkerCollectors(metrics, &client, &runner, engine.device.get());
    auto started = telemetry::MetricsServer::Start(metrics_listen, &metrics);
    if (!started.ok()) return Fail(started.status());
    metrics_server = std::move(*started);
    spdlog::info("metrics on {} (port {}), path /metrics", metrics_listen, metrics_server->port());
  }
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    draining_client = &client;
    if (stop_requested) {
      spdlog::info("signal: draining");
      client.RequestDrain();
    }
  }
  const Status s = client.Run();
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    draining_client = nullptr;
  }
  signals->reset();
  metrics_server.reset();
  if (leader) {
    if (const Status dismissed = leader->Dismiss(); !dismissed.ok()) return Fail(dismissed);
  }
  if (IsDeviceFaultEnd(s)) {
    spdlog::error("{}; exiting {}", std::string(s.message()), kExitDeviceFault);
    return kExitDeviceFault;
  }
  if (IsSchedulerRefusal(s)) {
    spdlog::error("refused by the scheduler, exiting {}: {}", kExitRefused,
                  std::string(s.message()));
    return kExitRefused;
  }
  if (!s.ok()) return Fail(s);
  const WorkerClientStats st = client.stats();
  spdlog::info(
      "drained; exiting. {} tasks done, {} trials sent; busy {:.3f} s of {:.3f} s "
      "connected ({:.1f}% waiting for work); hand-out latency p50 {:.3f} ms p99 {:.3f} ms "
      "over {} hand-outs",
      st.tasks_done, st.trials_sent, st.busy_seconds, st.connected_seconds,
      st.connected_seconds > 0 ? 100.0 * (1.0 - st.busy_seconds / st.connected_seconds) : 0.0,
      st.handout_p50_ms, st.handout_p99_ms, st.handouts);
  return 0;
}

}  // namespace
}  // namespace ripplekv::worker

int main(int argc, char** argv) { return ripplekv::worker::Main(argc, argv); }
