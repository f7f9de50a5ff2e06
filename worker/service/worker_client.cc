#include "worker/service/worker_client.h"

#include <time.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "base/version.h"
#include "method/profile_aggregate.h"
#include "proto/calibration_params.h"
#include "proto/client_channel.h"
#include "proto/profile.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"

namespace ripplekv::worker {
namespace {

namespace pb = ::ripplekv::v1;
using Clock = std::chrono::steady_clock;

absl::Status FromGrpcStatus(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

pb::RefusalReason ToProto(Refusal r) {
  switch (r) {
    case Refusal::kModelHashMismatch:
      return pb::REFUSAL_REASON_MODEL_HASH_MISMATCH;
    case Refusal::kAtCapacity:
      return pb::REFUSAL_REASON_AT_CAPACITY;
    case Refusal::kDraining:
      return pb::REFUSAL_REASON_DRAINING;
    case Refusal::kDataUnavailable:
      return pb::REFUSAL_REASON_DATA_UNAVAILABLE;
    case Refusal::kInvalidTask:
      return pb::REFUSAL_REASON_INVALID_TASK;
    case Refusal::kTransient:
      return pb::REFUSAL_REASON_TRANSIENT;
    case Refusal::kInsufficientMemory:
      return pb::REFUSAL_REASON_INSUFFICIENT_MEMORY;
  }
  return pb::REFUSAL_REASON_TRANSIENT;
}

// The assignment as a task; InvalidArgument for parameters the message cannot state
// (proto/calibration_params.h). The method's rules are TaskRunner::Check's.
StatusOr<TaskSpec> SpecFromProto(const pb::TaskAssignment& a) {
  TaskSpec spec;
  spec.task_id = a.task_id();
  spec.job_id = a.job_id();
  spec.model_hash = a.model_hash();
  spec.sample = a.sample();
  spec.layer = a.layer();
  ASSIGN_OR_RETURN(spec.params, pb::CalibrationParamsFromProto(a.params(), "params"));
  return spec;
}

JobData JobDataFromProto(const pb::CalibrationData& d) {
  JobData out;
  out.strict = d.strict();
  switch (d.source_case()) {
    case pb::CalibrationData::kText:
      out.source = JobData::Source::kText;
      out.text = d.text();
      break;
    case pb::CalibrationData::kJsonl:
      out.source = JobData::Source::kJsonl;
      out.jsonl_lines.assign(d.jsonl().lines().begin(), d.jsonl().lines().end());
      break;
    case pb::CalibrationData::kPath:
      out.source = JobData::Source::kPath;
      out.path = d.path();
      out.format = d.format() == pb::DATA_FORMAT_JSONL  ? DataFormat::kJsonl
                   : d.format() == pb::DATA_FORMAT_TEXT ? DataFormat::kText
                                                        : DataFormat::kAuto;
      break;
    case pb::CalibrationData::kBuiltin:
      out.source = JobData::Source::kBuiltin;
      out.builtin = d.builtin();
      break;
    default:
      out.source = JobData::Source::kBuiltin;
      out.builtin = std::string(kDefaultCalibrationBuiltin);
  }
  return out;
}

void SetDuration(std::chrono::nanoseconds d, google::protobuf::Duration* out) {
  const int64_t ns = d.count();
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

std::chrono::milliseconds FromDuration(const google::protobuf::Duration& d) {
  return std::chrono::milliseconds(d.seconds() * 1000 + d.nanos() / 1000000);
}

// "2026-12-03T08:10:00Z" (UTC, whole seconds); "an admin lifts it" when unset.
std::string FormatUntil(const google::protobuf::Timestamp& t) {
  if (t.seconds() <= 0) return "an admin lifts it";
  const time_t seconds = static_cast<time_t>(t.seconds());
  struct tm utc {};
  char buf[32] = {};
  if (gmtime_r(&seconds, &utc) == nullptr ||
      strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) {
    return absl::StrCat(t.seconds(), " s since the epoch");
  }
  return buf;
}

// A stream that ended this way may have left this process's own session alive at the scheduler
// (it has not noticed the broken connection yet), so the next Register takes it over.
bool ConnectionBroke(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct WorkerClient::Impl {
  WorkerClientOptions options;
  WorkerModelInfo model;
  TaskRunner* runner;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::WorkerService::Stub> stub;
  std::mt19937_64 rng{std::random_device{}()};
  // Random per client (one per process): tells the scheduler a registration is this process's
  // own again after its stream broke (RegisterRequest.instance).
  const std::string instance = absl::StrCat(absl::Hex(rng(), absl::kZeroPad16));

  mutable std::mutex mu;       // guards everything below, and the current session's state
  std::condition_variable cv;  // work arrived, the stream ended, or drain
  // The heartbeat thread's: the stream ended or heartbeats stop (not every message, which would
  // wake it once per task).
  std::condition_variable heartbeat_cv;
  bool drain = false;
  std::string device_fault;  // set with drain when a task ends on a faulted device
  WorkerClientStats stats;
  std::vector<double> handout_ms;  // the last hand-out latencies (RecordHandout)

  // The current session (valid while a stream is open).
  struct Session {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<pb::WorkerMessage, pb::SchedulerMessage>> stream;
    std::mutex write_mu;
    bool ended = false;                     // guarded by Impl::mu: Read returned false
    std::deque<pb::TaskAssignment> inbox;   // guarded by Impl::mu
    std::set<std::string> cancelled_tasks;  // guarded by Impl::mu
    std::set<std::string> cancelled_jobs;   // guarded by Impl::mu
    uint64_t heartbeat_sequence = 0;        // guarded by write_mu
    int active_tasks = 0;                   // guarded by Impl::mu
    // When the last task_done left with an empty inbox (the worker waits for the scheduler);
    // guarded by Impl::mu.
    std::optional<Clock::time_point> waiting_since;
    std::string running_task;  // guarded by Impl::mu: the task being run, if any
    // Guarded by Impl::mu: the scheduler quarantined this worker; the session ends, results of
    // the task in progress are dropped (its lease went back to pending).
    std::optional<pb::Quarantined> quarantined;
  };

  // How a session ended.
  struct SessionEnd {
    grpc::Status status;  // the stream's
    bool drained = false;
    std::optional<pb::Quarantined> quarantined;
  };

  // Requires mu.
  void RecordHandout(double ms) {
    constexpr size_t kMaxSamples = 65536;  // a ring: the last ones
    if (handout_ms.size() < kMaxSamples) {
      handout_ms.push_back(ms);
    } else {
      handout_ms[static_cast<size_t>(stats.handouts) % kMaxSamples] = ms;
    }
    ++stats.handouts;
  }

  // `coalesce`: the message may wait in gRPC's buffer and leave with the next one.
  bool Write(Session& s, const pb::WorkerMessage& m, bool coalesce = false) {
    std::lock_guard<std::mutex> lock(s.write_mu);
    grpc::WriteOptions options;
    if (coalesce) options.set_buffer_hint();
    return s.stream->Write(m, options);
  }

  // What Run returns once drained: OK, or Aborted naming the device fault that drained it.
  Status DrainedStatus() {
    std::lock_guard<std::mutex> lock(mu);
    if (device_fault.empty()) return absl::OkStatus();
    return absl::AbortedError(absl::StrCat("worker ", options.worker_id,
                                           " stopped on a device fault: ", device_fault));
  }

  // Sleeps for `d` or until drain; true when draining.
  bool SleepUnlessDrain(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, d, [&] { return drain; });
  }

  StatusOr<pb::RegisterResponse> Register(bool replace) {
    pb::RegisterRequest req;
    req.set_worker_id(options.worker_id);
    req.set_replace(replace);
    req.set_numerics(options.numerics);
    req.set_instance(instance);
    req.set_host(options.host);
    pb::ModelToProto(model, req.mutable_model());
    req.set_capacity(1 + options.prefetch);  // the running task and the queued ones
    req.set_memory_limit_bytes(options.memory_limit_bytes);
    req.set_worker_memory_limit_bytes(options.memory.limit_bytes);
    req.set_weight_bytes(options.memory.weight_bytes);
    req.set_tensor_parallel(options.tensor_parallel);
    req.set_device(options.device);
    req.set_thread_scratch_bytes(options.memory.thread_scratch_bytes);
    req.set_process_bytes(options.memory.process_bytes);
    req.set_version(std::string(BuildVersion()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options.register_deadline);
    pb::RegisterResponse resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    return resp;
  }

  pb::WorkerMessage Heartbeat(Session& s) {
    pb::WorkerMessage m;
    pb::Heartbeat* hb = m.mutable_heartbeat();
    {
      // Every task held: the scheduler renews only the leases listed here.
      std::lock_guard<std::mutex> lock(mu);
      hb->set_active_tasks(s.active_tasks);
      if (!s.running_task.empty()) hb->add_task_ids(s.running_task);
      for (const pb::TaskAssignment& queued : s.inbox) hb->add_task_ids(queued.task_id());
    }
    hb->set_memory_used_bytes(runner->cache_stats().bytes);
    for (const CachedSampleKey& k : runner->CachedSamples()) {
      pb::CachedSample* c = hb->add_cached_samples();
      c->set_job_id(k.job_id);
      c->set_sample(k.sample);
    }
    return m;
  }

  void ReaderLoop(Session& s) {
    pb::SchedulerMessage msg;
    while (s.stream->Read(&msg)) {
      if (msg.has_task_assignment()) {
        std::lock_guard<std::mutex> lock(mu);
        s.inbox.push_back(msg.task_assignment());
        if (s.waiting_since) {
          RecordHandout(
              std::chrono::duration<double, std::milli>(Clock::now() - *s.waiting_since).count());
          s.waiting_since.reset();
        }
      } else if (msg.has_task_cancellation()) {
        const pb::TaskCancellation& c = msg.task_cancellation();
        std::string job;
        {
          std::lock_guard<std::mutex> lock(mu);
          std::deque<pb::TaskAssignment> kept;
          for (auto& a : s.inbox) {
            const bool drop =
                c.has_task_id() ? a.task_id() == c.task_id() : a.job_id() == c.job_id();
            if (!drop) kept.push_back(std::move(a));
          }
          s.inbox.swap(kept);
          if (c.has_task_id()) s.cancelled_tasks.insert(c.task_id());
          if (c.has_job_id()) s.cancelled_jobs.insert(c.job_id());
          job = c.has_job_id() ? c.job_id() : "";
        }
        if (!job.empty()) runner->DropJob(job);
        spdlog::info("cancelled {} {}: {}", c.has_task_id() ? "task" : "job",
                     c.has_task_id() ? c.task_id() : c.job_id(), c.reason());
      } else if (msg.has_quarantined()) {
        spdlog::warn("quarantined by the scheduler until {}: {}; stopping",
                     FormatUntil(msg.quarantined().until()), msg.quarantined().reason());
        std::lock_guard<std::mutex> lock(mu);
        s.quarantined = msg.quarantined();
        s.inbox.clear();
      }
      cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu);
    s.ended = true;
    cv.notify_all();
    heartbeat_cv.notify_all();
  }

  void HeartbeatLoop(Session& s, std::chrono::milliseconds interval, const bool* stop) {
    std::unique_lock<std::mutex> lock(mu);
    while (!*stop && !s.ended) {
      if (heartbeat_cv.wait_for(lock, interval, [&] { return *stop || s.ended; })) break;
      lock.unlock();
      pb::WorkerMessage m = Heartbeat(s);
      bool ok;
      {
        std::lock_guard<std::mutex> wlock(s.write_mu);
        m.mutable_heartbeat()->set_sequence(++s.heartbeat_sequence);
        ok = s.stream->Write(m);
      }
      lock.lock();
      if (!ok) break;
    }
  }

  bool Cancelled(Session& s, const TaskSpec& spec) {
    std::lock_guard<std::mutex> lock(mu);
    return s.quarantined.has_value() || s.cancelled_tasks.contains(spec.task_id) ||
           s.cancelled_jobs.contains(spec.job_id);
  }

  void Refuse(Session& s, const std::string& task_id, const TaskRefusal& r) {
    pb::WorkerMessage m;
    m.mutable_task_refused()->set_task_id(task_id);
    m.mutable_task_refused()->set_reason(ToProto(r.reason));
    m.mutable_task_refused()->set_message(r.message);
    spdlog::warn("refused task {}: {}", task_id, r.message);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.tasks_refused;
    }
    Write(s, m);
  }

  Status LoadJobData(const TaskSpec& spec) {
    pb::GetJobDataRequest req;
    req.set_job_id(spec.job_id);
    req.set_worker_id(options.worker_id);
    pb::GetJobDataResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options.job_data_deadline);
    grpc::Status gs = stub->GetJobData(&ctx, req, &resp);
    if (!gs.ok()) return FromGrpcStatus(gs);
    return runner->LoadJob(spec.job_id, JobDataFromProto(resp.data()), DataOptionsOf(spec.params));
  }

  // Runs one assignment and reports it on the stream.
  void Handle(Session& s, const pb::TaskAssignment& a) {
    const telemetry::ScopedLogIds ids({.job = a.job_id(), .task = a.task_id()});
    const auto start = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      s.running_task = a.task_id();
    }
    HandleTask(s, a);
    std::lock_guard<std::mutex> lock(mu);
    s.running_task.clear();
    stats.busy_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }

  void HandleTask(Session& s, const pb::TaskAssignment& a) {
    StatusOr<TaskSpec> converted = SpecFromProto(a);
    if (!converted.ok()) {
      return Refuse(s, a.task_id(),
                    {Refusal::kInvalidTask, std::string(converted.status().message())});
    }
    const TaskSpec& spec = *converted;
    // One line per task started: operators (and the fault-injection tests) follow work by it.
    spdlog::info("task {} (job {}, sample {}, layer {}, {} trials)", spec.task_id, spec.job_id,
                 spec.sample, spec.layer, spec.params.trials);
    if (std::optional<TaskRefusal> r = runner->Check(spec)) return Refuse(s, spec.task_id, *r);
    const auto t0 = Clock::now();
    // A job's next round asks for more samples than were loaded: load them (LoadJob mirrors the
    // new set to a tensor-parallel group's other ranks).
    if (!runner->HasJob(spec.job_id, static_cast<int>(spec.params.samples))) {
      if (Status st = LoadJobData(spec); !st.ok()) {
        const Refusal reason = st.code() == absl::StatusCode::kUnavailable ||
                                       st.code() == absl::StatusCode::kDeadlineExceeded
                                   ? Refusal::kTransient
                                   : Refusal::kDataUnavailable;
        return Refuse(s, spec.task_id,
                      {reason, absl::StrCat("job ", spec.job_id, " data: ", st.message())});
      }
    }
    {
      pb::WorkerMessage m;
      m.mutable_task_accepted()->set_task_id(spec.task_id);
      // Nothing waits for it (the lease is held from the assignment on): it leaves with the
      // task's task_done or the next heartbeat, whichever is first, in the same write.
      Write(s, m, /*coalesce=*/true);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ++s.active_tasks;
    }
    StatusOr<TaskOutcome> outcome = runner->Run(spec);
    if (outcome.ok()) {
      // The scheduler would reject the task's results and fail the attempt anyway; say why here.
      for (size_t t = 0; t < outcome->kl.size(); ++t) {
        if (Status valid = method::CheckTrialKl(outcome->kl[t]); !valid.ok()) {
          outcome = absl::InternalError(absl::StrCat("trial ", t, ": ", valid.message()));
          break;
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      --s.active_tasks;
    }
    if (const std::string fault = options.device_fault ? options.device_fault() : "";
        !fault.empty()) {
      spdlog::error("device fault: {}; failing task {}, refusing further work and stopping",
                    fault, spec.task_id);
      if (!absl::IsUnavailable(outcome.status())) {
        outcome = absl::UnavailableError(absl::StrCat("device fault: ", fault));
      }
      std::lock_guard<std::mutex> lock(mu);
      device_fault = fault;
      drain = true;
      cv.notify_all();
    }
    if (Cancelled(s, spec)) return;
    pb::WorkerMessage done;
    pb::TaskDone* d = done.mutable_task_done();
    d->set_task_id(spec.task_id);
    d->set_job_id(spec.job_id);
    d->set_sample(spec.sample);
    d->set_layer(spec.layer);
    int64_t trials_sent = 0;
    if (outcome.ok()) {
      d->set_prefill_reused(outcome->prefill_reused);
      d->set_data_description(outcome->data_description);
      for (size_t t = 0; t < outcome->kl.size(); ++t) {  // in the task_done: one message
        pb::TrialResult* r = d->add_results();
        r->set_task_id(spec.task_id);
        r->set_job_id(spec.job_id);
        r->set_sample(spec.sample);
        r->set_layer(spec.layer);
        r->set_trial(static_cast<int32_t>(t));
        r->set_kl(outcome->kl[t]);
        ++trials_sent;
      }
    } else {
      d->mutable_error()->set_code(static_cast<int32_t>(outcome.status().code()));
      d->mutable_error()->set_message(std::string(outcome.status().message()));
    }
    SetDuration(Clock::now() - t0, d->mutable_elapsed());
    {
      std::lock_guard<std::mutex> lock(mu);
      if (s.inbox.empty()) s.waiting_since = Clock::now();
    }
    Write(s, done);
    std::lock_guard<std::mutex> lock(mu);
    stats.trials_sent += trials_sent;
    ++(outcome.ok() ? stats.tasks_done : stats.tasks_failed);
  }

  // One Connect stream; returns when it ends, after draining it, or when the scheduler
  // quarantines the worker.
  SessionEnd RunSession(const std::string& session_id, std::chrono::milliseconds heartbeat) {
    Session s;
    s.stream = stub->Connect(&s.context);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.sessions;
    }
    pb::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(options.worker_id);
    hello.mutable_hello()->set_session_id(session_id);
    if (!Write(s, hello)) {
      s.context.TryCancel();
      return {.status = s.stream->Finish()};
    }
    const auto session_start = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      stats.connected = true;
    }
    std::thread reader([&] { ReaderLoop(s); });
    bool stop_heartbeats = false;
    std::thread heartbeats([&] { HeartbeatLoop(s, heartbeat, &stop_heartbeats); });
    bool drained = false;
    while (true) {
      std::optional<pb::TaskAssignment> next;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock,
                [&] { return drain || s.ended || s.quarantined.has_value() || !s.inbox.empty(); });
        if (s.ended || s.quarantined) break;
        if (drain) {
          drained = true;
          break;
        }
        next = std::move(s.inbox.front());
        s.inbox.pop_front();
      }
      Handle(s, *next);
    }
    if (drained) {
      pb::WorkerMessage m;
      m.mutable_draining();
      Write(s, m);
      std::deque<pb::TaskAssignment> left;
      {
        std::lock_guard<std::mutex> lock(mu);
        left.swap(s.inbox);
      }
      for (const auto& a : left) Refuse(s, a.task_id(), {Refusal::kDraining, "worker draining"});
      {
        std::lock_guard<std::mutex> lock(s.write_mu);
        s.stream->WritesDone();
      }
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      stop_heartbeats = true;
      heartbeat_cv.notify_all();
      // Give the scheduler a moment to end the stream after our half-close, then cancel.
      if (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return s.ended; })) {
        s.context.TryCancel();
      }
    }
    heartbeats.join();
    bool ended;
    {
      std::lock_guard<std::mutex> lock(mu);
      ended = s.ended;
    }
    // Only a stream still open is cancelled: cancelling one the scheduler ended would replace its
    // status (FAILED_PRECONDITION, UNAVAILABLE, ...) with CANCELLED, and the next Register
    // decides by it.
    if (!ended) s.context.TryCancel();
    reader.join();
    grpc::Status st = s.stream->Finish();
    std::lock_guard<std::mutex> lock(mu);
    stats.connected_seconds += std::chrono::duration<double>(Clock::now() - session_start).count();
    stats.connected = false;
    if (!drained && !s.quarantined) {
      spdlog::warn("scheduler stream ended: {} {}", static_cast<int>(st.error_code()),
                   st.error_message());
    }
    return {.status = st, .drained = drained, .quarantined = s.quarantined};
  }
};

bool IsDeviceFaultEnd(const Status& status) { return absl::IsAborted(status); }

bool IsSchedulerRefusal(const Status& status) {
  return absl::IsAlreadyExists(status) || absl::IsFailedPrecondition(status);
}

WorkerClient::WorkerClient(const WorkerClientOptions& options, const WorkerModelInfo& model,
                           TaskRunner* runner)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->model = model;
  impl_->runner = runner;
}

WorkerClient::~WorkerClient() = default;

void WorkerClient::RequestDrain() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->drain = true;
  impl_->cv.notify_all();
}

WorkerClientStats WorkerClient::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  WorkerClientStats out = impl_->stats;
  std::vector<double> sorted = impl_->handout_ms;
  if (!sorted.empty()) {
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) {
      return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
    };
    out.handout_p50_ms = at(0.50);
    out.handout_p99_ms = at(0.99);
  }
  return out;
}

Status WorkerClient::Run() {
  Impl& im = *impl_;
  if (im.options.scheduler_address.empty()) {
    return absl::InvalidArgumentError("scheduler address is empty");
  }
  if (im.options.worker_id.empty() || im.options.worker_id.size() > 128) {
    return absl::InvalidArgumentError("worker id must be 1..128 characters");
  }
  if (im.options.prefetch < 0 || im.options.prefetch > kMaxPrefetch) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch ", im.options.prefetch, " is outside 0..", kMaxPrefetch));
  }
  pb::ClientChannelOptions channel_options = im.options.channel;
  channel_options.keepalive_without_calls = true;
  im.channel = pb::MakeClientChannel(im.options.scheduler_address, channel_options);
  im.stub = pb::WorkerService::NewStub(im.channel);

  std::chrono::milliseconds backoff = im.options.initial_backoff;
  bool replace = im.options.replace;  // see "Taking over an id" in the header
  while (true) {
    {
      std::lock_guard<std::mutex> lock(im.mu);
      if (im.drain) break;
    }
    StatusOr<pb::RegisterResponse> reg = im.Register(replace);
    if (reg.ok()) {
      {
        std::lock_guard<std::mutex> lock(im.mu);
        ++im.stats.registrations;
      }
      std::chrono::milliseconds hb = FromDuration(reg->heartbeat_interval());
      if (hb.count() <= 0) hb = im.options.default_heartbeat;
      spdlog::info("registered with {} as {} (session {}{})", im.options.scheduler_address,
                   im.options.worker_id, reg->session_id(),
                   replace ? ", taking the id over from any live session" : "");
      const auto session_start = Clock::now();
      const Impl::SessionEnd end = im.RunSession(reg->session_id(), hb);
      if (Clock::now() - session_start >= im.options.stable_session) {
        backoff = im.options.initial_backoff;
      }
      if (end.quarantined) {
        return absl::FailedPreconditionError(
            absl::StrCat("worker ", im.options.worker_id, " quarantined by the scheduler at ",
                         im.options.scheduler_address, " until ",
                         FormatUntil(end.quarantined->until()), ": ", end.quarantined->reason()));
      }
      replace = ConnectionBroke(end.status);
      // Tasks leased to the old session return to pending at the scheduler; forget nothing else.
    } else if (absl::IsAlreadyExists(reg.status())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "the scheduler at ", im.options.scheduler_address, " refused worker id \"",
          im.options.worker_id, "\": ", reg.status().message(),
          // The scheduler names the way out itself; an older one may not.
          absl::StrContains(reg.status().message(), "--replace")
              ? ""
              : "; give each worker a distinct --id, or pass --replace to take the id over "
                "(e.g. right after a crash)"));
    } else if (absl::IsFailedPrecondition(reg.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("the scheduler at ", im.options.scheduler_address, " refused worker \"",
                       im.options.worker_id, "\": ", reg.status().message()));
    } else {
      spdlog::warn("register with {} failed: {}{}", im.options.scheduler_address,
                   reg.status().ToString(),
                   pb::TlsHintFor(static_cast<grpc::StatusCode>(reg.status().code()),
                                  std::string(reg.status().message()),
                                  pb::IsPlaintext(im.options.channel)));
      if (reg.status().code() == absl::StatusCode::kInvalidArgument) {
        // The request itself is wrong (e.g. model info); retrying will not help soon, but keep
        // trying at the slowest rate so a fixed scheduler picks the worker up.
        backoff = im.options.max_backoff;
      }
    }
    std::uniform_real_distribution<double> jitter(0.0, 1.0);  // full jitter
    const auto delay = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(im.rng)));
    if (im.SleepUnlessDrain(delay)) break;
    backoff = std::min(backoff * 2, im.options.max_backoff);
  }
  return im.DrainedStatus();
}

}  // namespace ripplekv::worker
