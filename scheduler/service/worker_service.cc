#include "scheduler/service/worker_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "scheduler/core/worker_session.h"
#include "scheduler/service/convert.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"

namespace ripplekv::scheduler::service {
namespace {

void MsToDuration(int64_t ms, google::protobuf::Duration* out) {
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1'000'000));
}

RefusalReason RefusalReasonOf(v1::RefusalReason reason) {
  switch (reason) {
    case v1::REFUSAL_REASON_MODEL_HASH_MISMATCH:
      return RefusalReason::kModelHashMismatch;
    case v1::REFUSAL_REASON_AT_CAPACITY:
      return RefusalReason::kAtCapacity;
    case v1::REFUSAL_REASON_DRAINING:
      return RefusalReason::kDraining;
    case v1::REFUSAL_REASON_DATA_UNAVAILABLE:
      return RefusalReason::kDataUnavailable;
    case v1::REFUSAL_REASON_INVALID_TASK:
      return RefusalReason::kInvalidTask;
    case v1::REFUSAL_REASON_TRANSIENT:
      return RefusalReason::kTransient;
    case v1::REFUSAL_REASON_INSUFFICIENT_MEMORY:
      return RefusalReason::kInsufficientMemory;
    default:
      return RefusalReason::kUnspecified;
  }
}

// The ids the log lines about `m` from `worker_id` carry (docs/OPERATIONS.md, "Logs").
telemetry::LogIds IdsOf(const std::string& worker_id, const v1::WorkerMessage& m) {
  telemetry::LogIds ids{.worker = worker_id};
  switch (m.kind_case()) {
    case v1::WorkerMessage::kTaskRefused:
      ids.task = m.task_refused().task_id();
      break;
    case v1::WorkerMessage::kTrialResult:
      ids.task = m.trial_result().task_id();
      ids.job = m.trial_result().job_id();
      break;
    case v1::WorkerMessage::kTaskDone:
      ids.task = m.task_done().task_id();
      ids.job = m.task_done().job_id();
      break;
    default:
      break;
  }
  return ids;
}

}  // namespace

// One worker's Connect stream. Writes go through a queue (one write in flight at a time); gRPC
// calls (StartWrite, Finish) are made without holding mu_. Deletes itself in OnDone.
class WorkerServiceImpl::ConnectReactor final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  explicit ConnectReactor(WorkerServiceImpl* service) : service_(service) { StartRead(&in_); }

  const std::string& worker_id() const { return worker_id_; }

  // Ends the stream once queued messages are written.
  void Close(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      if (!pending_finish_) pending_finish_ = status;
    }
    Pump();
  }

  // Tells the worker to stop lease `lease` (if this stream holds it) and forgets it.
  void CancelTask(const LeaseId& lease, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::optional<std::string> task_id = session_.Revoke(lease);
      if (!task_id) return;
      EnqueueCancellation(*task_id, reason);
    }
    Pump();
  }

  // Offers this worker tasks that became free elsewhere (another worker's leases returned to
  // pending), so an idle worker does not wait for its next heartbeat to get them.
  void Refill() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!attached_) return;
      if (Status status = Fill(); !status.ok()) {
        closing_ = true;
        if (!pending_finish_) pending_finish_ = ToGrpcStatus(status);
      }
    }
    Pump();
  }

  // Tells the worker it is quarantined, then ends the stream (worker.proto, Quarantined).
  void Quarantine(const QuarantineNotice& notice) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      v1::SchedulerMessage message;
      message.mutable_quarantined()->set_reason(notice.reason);
      TimeMsToProto(notice.until_ms, message.mutable_quarantined()->mutable_until());
      Enqueue(std::move(message));
      session_.Clear();
      closing_ = true;
      if (!pending_finish_) {
        pending_finish_ = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                       "worker quarantined: " + notice.reason);
      }
    }
    Pump();
  }

  // Tells the worker that job `job_id` ended, so it drops the job's data and prefills.
  void EndJob(store::JobId job, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      v1::SchedulerMessage message;
      message.mutable_task_cancellation()->set_job_id(FormatJobId(job));
      message.mutable_task_cancellation()->set_reason(reason);
      Enqueue(std::move(message));
      session_.EndJob(job);
    }
    Pump();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker half-closed or went away
      Close(grpc::Status::OK);
      return;
    }
    WorkPool* pool = service_->options_.pool;
    if (pool == nullptr || Inline(in_)) return HandleRead();
    {
      std::lock_guard<std::mutex> lock(life_mu_);
      handling_ = true;
    }
    pool->Submit([this] {
      HandleRead();
      std::unique_lock<std::mutex> lock(life_mu_);
      handling_ = false;
      if (done_) {  // OnDone ran meanwhile and left the deletion to this
        lock.unlock();
        delete this;
      }
    });
  }

  // Whether a message of an attached stream is handled on the gRPC thread, without the pool's
  // hand-off: one that touches only memory, or the store without an fsync. Trial results and
  // acceptances touch this stream's memory (a result is checked and kept until task_done); a
  // successful task_done queues its results for the group commit (SubmitTaskResults) and leases
  // the next task (an unsynced write), unless its data description is news for the job (a
  // synced write). Errors on these paths (an invalid result fails its attempt) reach the store
  // here too; they are rare.
  bool Inline(const v1::WorkerMessage& message) {
    if (!attached_) return false;
    switch (message.kind_case()) {
      case v1::WorkerMessage::kTrialResult:
      case v1::WorkerMessage::kTaskAccepted:
        return true;
      case v1::WorkerMessage::kTaskDone: {
        const v1::TaskDone& done = message.task_done();
        if (done.has_error() && done.error().code() != 0) return false;
        if (done.data_description().empty()) return true;
        std::lock_guard<std::mutex> lock(mu_);
        const WorkerSession::HeldTask* held = session_.Held(done.task_id());
        if (held == nullptr) return true;  // rejected without the store
        return session_.Described(held->lease.key.job, done.data_description());
      }
      default:
        return false;
    }
  }

  // The message in in_, on the pool: handled, then the next read starts (so a stream has at most
  // one message in the pool, and its messages are handled in order).
  void HandleRead() {
    Status status = CheckMessageSize(in_, kMaxRequestBytes, "Connect");
    if (!status.ok()) {
      Close(ToGrpcStatus(status));
      return;
    }
    if (!attached_) {
      // Attach locks the service; the service locks streams (DeliverEvents, Register) in that
      // order, so this runs without mu_. Reads are serialized, so they read attached_ without a
      // lock.
      status = Hello(in_);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      status = Handle(in_);
    }
    if (!status.ok()) {
      Close(ToGrpcStatus(status));
      return;
    }
    service_->DeliverEvents();  // without mu_: it locks the service, then streams
    bool refill_others;
    {
      std::lock_guard<std::mutex> lock(mu_);
      refill_others = std::exchange(refill_others_, false);
    }
    // A task held for verification went back to pending for another worker: idle ones get it
    // now, not at their next heartbeat. Without mu_, as above.
    if (refill_others) service_->RefillWorkers({});
    Pump();
    bool closing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing = closing_;
      in_.Clear();
    }
    if (!closing) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      out_.pop_front();
      if (!ok) {
        closing_ = true;
        out_.clear();
        if (!pending_finish_) {
          pending_finish_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
        }
      }
    }
    Pump();
  }

  void OnDone() override {
    service_->Detach(this);
    {
      std::lock_guard<std::mutex> lock(life_mu_);
      if (handling_) {  // a message is still being handled on the pool: it deletes this
        done_ = true;
        return;
      }
    }
    delete this;
  }

 private:
  // Requires mu_.
  void Enqueue(v1::SchedulerMessage message) {
    if (!closing_) out_.push_back(std::move(message));
  }

  // Starts the next write, or the Finish once the queue is empty and a close was asked.
  void Pump() {
    const v1::SchedulerMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || finish_called_) return;
      if (!out_.empty()) {
        writing_ = true;
        next = &out_.front();  // deque: stays valid while later messages are pushed
      } else if (pending_finish_) {
        finish_called_ = true;
        finish = *pending_finish_;
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      Finish(*finish);
    }
  }

  // The first message. Non-OK ends the stream with that status.
  Status Hello(const v1::WorkerMessage& message) {
    if (message.kind_case() != v1::WorkerMessage::kHello) {
      return absl::FailedPreconditionError("the first message on Connect must be hello");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      worker_id_ = message.hello().worker_id();
    }
    RETURN_IF_ERROR(
        service_->Attach(message.hello().worker_id(), message.hello().session_id(), this));
    std::lock_guard<std::mutex> lock(mu_);
    attached_ = true;
    return Fill();
  }

  // Requires mu_. Non-OK ends the stream with that status.
  Status Handle(const v1::WorkerMessage& message) {
    const telemetry::ScopedLogIds ids(IdsOf(worker_id_, message));
    switch (message.kind_case()) {
      case v1::WorkerMessage::kHello:
        return absl::FailedPreconditionError("hello sent twice on one stream");
      case v1::WorkerMessage::kHeartbeat: {
        std::vector<PrefillKey> held;
        for (const v1::CachedSample& sample : message.heartbeat().cached_samples()) {
          StatusOr<store::JobId> job = ParseJobId(sample.job_id(), "cached_samples.job_id");
          if (job.ok() && sample.sample() >= 0) {
            held.push_back({*job, static_cast<uint32_t>(sample.sample())});
          }
        }
        const std::vector<std::string> task_ids(message.heartbeat().task_ids().begin(),
                                                message.heartbeat().task_ids().end());
        const std::vector<LeaseId> listed = session_.Listed(task_ids);
        Status status = service_->scheduler_->Heartbeat(worker_id_, held, listed);
        if (absl::IsNotFound(status)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "worker ", worker_id_, " is not registered (timed out?); register again"));
        }
        RETURN_IF_ERROR(status);
        v1::SchedulerMessage ack;
        ack.mutable_heartbeat_ack()->set_sequence(message.heartbeat().sequence());
        Enqueue(std::move(ack));
        return Fill();
      }
      case v1::WorkerMessage::kTaskAccepted:
        return absl::OkStatus();
      case v1::WorkerMessage::kTaskRefused:
        return Refused(message.task_refused());
      case v1::WorkerMessage::kTrialResult:
        return Result(message.trial_result());
      case v1::WorkerMessage::kTaskDone:
        return Done(message.task_done());
      case v1::WorkerMessage::kDraining:
        session_.Drain();
        return absl::OkStatus();
      case v1::WorkerMessage::KIND_NOT_SET:
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // Sends assignments while the scheduler has work for this worker and it has capacity.
  Status Fill() {
    if (session_.draining() || closing_) return absl::OkStatus();
    while (true) {
      StatusOr<std::optional<Assignment>> next = service_->scheduler_->NextTask(worker_id_);
      if (absl::IsNotFound(next.status())) {
        return absl::FailedPreconditionError(
            absl::StrCat("worker ", worker_id_, " is not registered; register again"));
      }
      RETURN_IF_ERROR(next.status());
      if (!next->has_value()) return absl::OkStatus();
      const Assignment& assignment = **next;
      v1::SchedulerMessage message;
      *message.mutable_task_assignment() = AssignmentToProto(assignment);
      session_.Assigned(message.task_assignment().task_id(), assignment);
      Enqueue(std::move(message));
    }
  }

  // Requires mu_. The task this stream holds under `task_id`, or nullptr after counting and
  // logging the message as rejected (a task id it was never given, or one it no longer holds) and
  // telling the worker: a TaskCancellation of that task id with the reason, so a worker that lost
  // a lease stops the task and one that names made-up tasks learns why nothing happens. The
  // notices are not queued past kMaxQueuedNotices, so a worker that does not read cannot grow
  // this stream's queue.
  WorkerSession::HeldTask* Held(const std::string& task_id, std::string_view what) {
    if (WorkerSession::HeldTask* held = session_.Held(task_id)) return held;
    const std::string why =
        Cat(what, " for task \"", EscapeForLog(task_id), "\", which this stream does not hold");
    Reject(why);
    constexpr size_t kMaxQueuedNotices = 256;
    if (out_.size() < kMaxQueuedNotices) EnqueueCancellation(task_id, Cat("rejected: ", why));
    return nullptr;
  }

  // Counts a rejected message; logs the first few of each stream, then every 1000th.
  void Reject(const std::string& why) {
    const uint64_t n = ++rejected_;
    service_->rejected_messages_.fetch_add(1, std::memory_order_relaxed);
    if (n <= 8 || n % 1000 == 0) {
      spdlog::warn("worker {}: rejected message #{}: {}", EscapeForLog(worker_id_), n, why);
    }
  }

  // Requires mu_. Logs a call into the scheduler about a lease that did not succeed; a lease that
  // is no longer held (it expired meanwhile) counts as a rejected message.
  void Report(const Status& status, std::string_view what) {
    if (status.ok()) return;
    if (absl::IsFailedPrecondition(status)) {
      Reject(Cat(what, ": ", std::string(status.message())));
    } else {
      spdlog::warn("worker {}: {}: {}", EscapeForLog(worker_id_), what, status.ToString());
    }
  }

  // The session decides what the refusal does (WorkerSession::StepFor); this carries it out.
  Status Refused(const v1::TaskRefused& refused) {
    if (Held(refused.task_id(), "task_refused") == nullptr) return absl::OkStatus();
    const LeaseId lease = session_.Take(refused.task_id())->lease;
    const std::string message = EscapeForLog(refused.message(), 512);
    spdlog::info("worker {} refused task {} ({}): {}", worker_id_, refused.task_id(),
                 v1::RefusalReason_Name(refused.reason()), message);
    Scheduler& scheduler = *service_->scheduler_;
    const bool memory = refused.reason() == v1::REFUSAL_REASON_INSUFFICIENT_MEMORY;
    const RefusalStep step = WorkerSession::StepFor(RefusalReasonOf(refused.reason()));
    switch (step) {
      case RefusalStep::kFailJob:
        Report(scheduler.FailJobOfLease(worker_id_, lease,
                                        absl::StrCat("worker ", worker_id_, " refused task ",
                                                     refused.task_id(), " as invalid: ", message)),
               "refusal");
        break;
      case RefusalStep::kRefuseJob:
      case RefusalStep::kRefuseJobOrFail: {
        StatusOr<bool> failed = scheduler.RefuseJob(
            worker_id_, lease, step == RefusalStep::kRefuseJobOrFail,
            absl::StrCat(memory ? "no worker has the memory for the job"
                                : "every worker refused the job's data",
                         "; last: worker ", worker_id_, ": ", message));
        Report(failed.status(), "refusal");
        if (failed.ok() && *failed) {
          spdlog::warn("job {} failed: {}", lease.key.job,
                       memory ? "no worker has the memory for it" : "no worker can read its data");
        }
        break;
      }
      case RefusalStep::kReleaseAndDrain:
        session_.Drain();
        Report(scheduler.ReleaseTask(worker_id_, lease), "refusal");
        break;
      case RefusalStep::kRelease:
        Report(scheduler.ReleaseTask(worker_id_, lease), "refusal");
        break;
    }
    return Fill();
  }

  // A trial result is checked against the lease it names (task, trial range, each trial once,
  // method::CheckTrialKl) and kept until task_done, which stores the task's results in one
  // write. An invalid one fails the attempt: the lease is released and the worker told to stop.
  Status Result(const v1::TrialResult& result) {
    if (Held(result.task_id(), "trial_result") == nullptr) return absl::OkStatus();
    return AddResult(result.task_id(), result);
  }

  // Requires mu_. Result() for the task held as `task_id`, whichever message carried `result`:
  // the session checks and keeps it; an invalid one fails the attempt here.
  Status AddResult(const std::string& task_id, const v1::TrialResult& result) {
    const LeaseId lease = session_.Held(task_id)->lease;
    const std::string invalid = session_.AddResult(task_id, {.task_id = result.task_id(),
                                                             .job_id = result.job_id(),
                                                             .sample = result.sample(),
                                                             .layer = result.layer(),
                                                             .trial = result.trial(),
                                                             .kl = result.kl()});
    if (invalid.empty()) return absl::OkStatus();
    service_->invalid_results_.fetch_add(1, std::memory_order_relaxed);
    const std::string why = absl::StrCat("worker ", worker_id_, " sent an invalid result for task ",
                                         task_id, ": ", invalid);
    spdlog::warn("{}; the attempt fails", why);
    EnqueueCancellation(task_id, "invalid result: " + invalid);
    Report(service_->scheduler_->FailAttempt(worker_id_, lease, why), "invalid result");
    return Fill();
  }

  Status Done(const v1::TaskDone& done) {
    if (Held(done.task_id(), "task_done") == nullptr) return absl::OkStatus();
    const bool failed = done.has_error() && done.error().code() != 0;
    if (!failed) {  // a failed task's results are not kept
      for (const v1::TrialResult& result : done.results()) {
        RETURN_IF_ERROR(AddResult(done.task_id(), result));
        // Invalid: the attempt failed and the session let the task go.
        if (session_.Held(done.task_id()) == nullptr) return absl::OkStatus();
      }
    }
    WorkerSession::HeldTask task = *session_.Take(done.task_id());
    Scheduler& scheduler = *service_->scheduler_;
    if (failed) {
      const std::string why =
          absl::StrCat("task ", done.task_id(), " failed on worker ", worker_id_, ": ",
                       EscapeForLog(done.error().message(), 512));
      const bool fails_job = WorkerSession::ErrorFailsJob(
          static_cast<absl::StatusCode>(done.error().code()));
      Report(fails_job ? scheduler.FailJobOfLease(worker_id_, task.lease, why)
                       : scheduler.FailAttempt(worker_id_, task.lease, why),
             "task_done with an error");
      return Fill();
    }
    // Every task_done carries the description: the scheduler hears each stream's once per job.
    if (!done.data_description().empty() &&
        !session_.Described(task.lease.key.job, done.data_description())) {
      session_.Describe(task.lease.key.job, done.data_description());
      StatusOr<bool> same = scheduler.DescribeJobData(task.lease.key.job, done.data_description());
      if (!same.ok()) {
        spdlog::warn("worker {}: data description of job {}: {}", worker_id_, task.lease.key.job,
                     same.status().ToString());
      } else if (!*same) {
        // Workers derived different samples from the same data: their results would not agree.
        spdlog::warn("worker {} describes job {}'s data as \"{}\", unlike the first report",
                     worker_id_, task.lease.key.job, EscapeForLog(done.data_description(), 512));
      }
    }
    // The slot is free once the results are checked: the next task goes out now, while the
    // results are written (the outcome is logged from the committer's thread; this stream may be
    // gone by then).
    StatusOr<Submitted> submitted = scheduler.SubmitTaskResults(
        worker_id_, task.lease, std::move(task.results),
        [service = service_, worker = worker_id_, task_id = done.task_id(),
         job = task.lease.key.job](StatusOr<TaskResultsOutcome> outcome) {
          service->CompletionWritten(worker, task_id, job, outcome);
        });
    if (absl::IsInvalidArgument(submitted.status())) {
      service_->invalid_results_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("{}; the attempt fails", std::string(submitted.status().message()));
    } else if (submitted.ok() && *submitted == Submitted::kAwaitingVerification) {
      spdlog::debug("task {} of worker {} held for verification by another worker",
                    done.task_id(), worker_id_);
      refill_others_ = true;
    } else {
      Report(submitted.status(), absl::StrCat("task ", done.task_id(), " done"));
    }
    return Fill();
  }

  // Requires mu_.
  void EnqueueCancellation(const std::string& task_id, const std::string& reason) {
    v1::SchedulerMessage message;
    message.mutable_task_cancellation()->set_task_id(task_id);
    message.mutable_task_cancellation()->set_reason(reason);
    Enqueue(std::move(message));
  }

  WorkerServiceImpl* const service_;
  v1::WorkerMessage in_;  // one read in flight at a time
  // Hello accepted. Written once, under mu_, by the (serialized) reads, which read it without
  // mu_; other threads (Refill) read it under mu_.
  bool attached_ = false;

  std::mutex mu_;
  std::string worker_id_;  // set by hello; guarded by mu_
  // The leases it gave the worker, their results so far, what it reported: the fencing state and
  // its rules; guarded by mu_.
  WorkerSession session_;
  uint64_t rejected_ = 0;  // messages rejected on this stream; guarded by mu_
  std::mutex life_mu_;     // orders OnDone with a message handled on the pool
  bool handling_ = false;  // guarded by life_mu_: a message is queued or running on the pool
  bool done_ = false;      // guarded by life_mu_: OnDone ran while handling_
  std::deque<v1::SchedulerMessage> out_;  // front is being written when writing_
  bool writing_ = false;
  bool refill_others_ = false;  // guarded by mu_: a task went back to pending for another worker
  bool closing_ = false;
  bool finish_called_ = false;
  std::optional<grpc::Status> pending_finish_;
};

WorkerServiceImpl::WorkerServiceImpl(Scheduler* scheduler, WorkerServiceOptions options)
    : scheduler_(scheduler), options_(options) {
  // A held verification run that completed unverified is a completion like any other.
  scheduler_->SetHeldCompletionListener(
      [this](const std::string& worker_id, const store::TaskKey& key,
             const StatusOr<TaskResultsOutcome>& outcome) {
        CompletionWritten(worker_id, FormatTaskId({.key = key}), key.job, outcome);
      });
}

WorkerServiceImpl::~WorkerServiceImpl() {
  scheduler_->SetHeldCompletionListener(nullptr);
  Shutdown();
}

void WorkerServiceImpl::Shutdown() {
  std::unique_lock<std::recursive_mutex> lock(mu_);
  shutting_down_ = true;
  const std::vector<ConnectReactor*> streams(streams_.begin(), streams_.end());
  for (ConnectReactor* stream : streams) {
    stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
  streams_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return streams_.empty(); });
}

void WorkerServiceImpl::DeliverEvents() {
  const std::vector<Event> events = scheduler_->TakeEvents();
  if (events.empty()) return;
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // The stream of `worker_id`'s current session, or null. Streams stay alive while mu_ is held
  // (their OnDone waits for it in Detach).
  auto stream_of = [&](const std::string& worker_id) -> ConnectReactor* {
    auto it = sessions_.find(worker_id);
    return it == sessions_.end() ? nullptr : it->second.stream;
  };
  for (const Event& event : events) {
    if (const auto* revocation = std::get_if<Revocation>(&event)) {
      spdlog::warn("task {} taken back: {}", FormatTaskId(revocation->lease), revocation->reason);
      if (ConnectReactor* stream = stream_of(revocation->worker_id)) {
        stream->CancelTask(revocation->lease, revocation->reason);
      }
    } else if (const auto* notice = std::get_if<QuarantineNotice>(&event)) {
      spdlog::warn("worker {} quarantined: {}", EscapeForLog(notice->worker_id), notice->reason);
      if (ConnectReactor* stream = stream_of(notice->worker_id)) stream->Quarantine(*notice);
    } else if (const auto* job = std::get_if<EndedJob>(&event)) {
      const std::string reason =
          absl::StrCat("job ", job->id, " ", std::string(store::JobStateName(job->state)));
      // Collected first: a stream's write may end it inline, and its Detach changes sessions_.
      std::vector<ConnectReactor*> streams;
      for (const auto& [worker_id, session] : sessions_) {
        if (session.stream != nullptr && session.model_hash == job->model_hash) {
          streams.push_back(session.stream);
        }
      }
      for (ConnectReactor* stream : streams) stream->EndJob(job->id, reason);
    }
  }
}

void WorkerServiceImpl::Tick() {
  StatusOr<ExpireOutcome> outcome = scheduler_->ExpireLeases();
  if (!outcome.ok()) {
    spdlog::error("expiring leases: {}", outcome.status().ToString());
  } else {
    for (const std::string& worker : outcome->dropped_workers) {
      spdlog::warn("worker {} silent past the heartbeat timeout; dropped", worker);
    }
    if (!outcome->released.empty()) {
      spdlog::info("{} expired leases returned to pending", outcome->released.size());
    }
    const bool freed = !outcome->released.empty() || !outcome->dropped_workers.empty();
    for (uint32_t version : outcome->profiles_written) {
      spdlog::info("a job left complete was finished: profile version {}", version);
    }
    for (store::JobId job : outcome->jobs_extended) {
      spdlog::info("job {} left at the end of a round: next round planned", job);
    }
    for (const std::string& error : outcome->finish_errors) {
      spdlog::warn("finishing a complete job (retried on the next tick): {}", error);
    }
    DeliverEvents();  // the revocations, quarantines and ended jobs of this tick
    if (freed || !outcome->jobs_extended.empty()) RefillWorkers({});
  }
}

void WorkerServiceImpl::CompletionWritten(const std::string& worker_id, const std::string& task_id,
                                          store::JobId job,
                                          const StatusOr<TaskResultsOutcome>& outcome) {
  const telemetry::ScopedLogIds ids(
      {.job = std::to_string(job), .task = task_id, .worker = worker_id});
  if (!outcome.ok()) {
    // FailedPrecondition: the job ended or another attempt completed the task meanwhile.
    if (absl::IsFailedPrecondition(outcome.status())) {
      rejected_messages_.fetch_add(1, std::memory_order_relaxed);
    }
    spdlog::warn("worker {}: task {} done: {}", EscapeForLog(worker_id), task_id,
                 outcome.status().ToString());
  } else if (outcome->conflicts > 0) {
    spdlog::error("task {}: {} results differ bitwise from the stored ones", task_id,
                  outcome->conflicts);
  } else if (outcome->job_succeeded) {
    spdlog::info("job {} succeeded: profile version {}", job, outcome->profile_version);
  } else if (outcome->job_extended) {
    spdlog::info("job {} not stable yet: next round, {} samples planned", job,
                 outcome->samples_planned);
  }
  // The job may have ended with this write. Only a written completion can end one; an error may
  // be answered on the submitting thread itself (the committer stopped), which holds its stream.
  if (outcome.ok()) DeliverEvents();
  // A new round's tasks go to idle workers now, not at their next heartbeat. This thread holds no
  // stream, so it takes the service and then each stream, as Tick does.
  if (outcome.ok() && outcome->job_extended) RefillWorkers({});
}

WorkerServiceStats WorkerServiceImpl::Stats() const {
  return {.rejected_messages = rejected_messages_.load(std::memory_order_relaxed),
          .invalid_results = invalid_results_.load(std::memory_order_relaxed)};
}

Status WorkerServiceImpl::DoRegister(const v1::RegisterRequest& request,
                                     v1::RegisterResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "Register"));
  ASSIGN_OR_RETURN(WorkerRegistration registration, RegistrationFromProto(request));
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  if (Status registered = scheduler_->RegisterWorker(registration); !registered.ok()) {
    spdlog::warn("worker {}: registration refused: {}", EscapeForLog(registration.worker_id),
                 registered.ToString());
    return registered;
  }
  Session& session = sessions_[registration.worker_id];
  ConnectReactor* retired = session.stream;
  session.session_id = absl::StrCat(registration.worker_id, "#", next_session_++);
  session.model_hash = registration.model.hash;
  session.stream = nullptr;
  if (retired != nullptr) {
    retired->Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                "session superseded by a newer Register of this worker"));
  }
  response->set_session_id(session.session_id);
  MsToDuration(options_.heartbeat_interval_ms, response->mutable_heartbeat_interval());
  MsToDuration(options_.lease_timeout_ms, response->mutable_lease_timeout());
  spdlog::info("worker {} registered ({}, capacity {}, model {}, {}{})", registration.worker_id,
               request.version().empty() ? "version not reported" : EscapeForLog(request.version()),
               registration.capacity, registration.model.hash,
               request.device().empty() ? "device not reported" : request.device(),
               request.tensor_parallel() > 1
                   ? absl::StrCat(", ", request.tensor_parallel(), " tensor-parallel ranks")
                   : std::string());
  // The worker's memory accounting (docs/MEMORY.md), as it reported it; MiB, 0 when not reported.
  constexpr double kMiB = 1024.0 * 1024.0;
  spdlog::info(
      "worker {} memory: limit {:.1f} MiB, weights {:.1f} MiB, thread scratch {:.1f} MiB, "
      "process {:.1f} MiB, prefill cache {:.1f} MiB",
      registration.worker_id, request.worker_memory_limit_bytes() / kMiB,
      request.weight_bytes() / kMiB, request.thread_scratch_bytes() / kMiB,
      request.process_bytes() / kMiB, request.memory_limit_bytes() / kMiB);
  return absl::OkStatus();
}

Status WorkerServiceImpl::DoGetJobData(const v1::GetJobDataRequest& request,
                                       v1::GetJobDataResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "GetJobData"));
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("worker_id: is required");
  }
  ASSIGN_OR_RETURN(store::JobSpec spec, scheduler_->JobData(request.worker_id(), id));
  CalibrationDataToProto(spec, spec.data_inline.size(), /*with_inline_data=*/true,
                         response->mutable_data());
  return absl::OkStatus();
}

Status WorkerServiceImpl::Attach(const std::string& worker_id, const std::string& session_id,
                                 ConnectReactor* stream) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end() || it->second.session_id != session_id) {
    return absl::FailedPreconditionError(absl::StrCat("hello: unknown or superseded session \"",
                                                      session_id, "\" of worker \"", worker_id,
                                                      "\"; register again"));
  }
  if (it->second.stream != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("hello: session \"", session_id, "\" already has a stream"));
  }
  it->second.stream = stream;
  return absl::OkStatus();
}

void WorkerServiceImpl::Detach(ConnectReactor* stream) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  streams_.erase(stream);
  streams_cv_.notify_all();
  auto it = sessions_.find(stream->worker_id());
  if (it == sessions_.end() || it->second.stream != stream) return;  // retired or never bound
  const std::string model_hash = it->second.model_hash;
  sessions_.erase(it);
  Status status = scheduler_->WorkerGone(stream->worker_id());
  if (!status.ok() && !absl::IsNotFound(status)) {
    spdlog::warn("worker {} gone: {}", stream->worker_id(), status.ToString());
  } else {
    spdlog::info("worker {} disconnected; its leases return to pending", stream->worker_id());
  }
  RefillWorkers(model_hash);
}

void WorkerServiceImpl::RefillWorkers(const std::string& model_hash) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // Collected first: a stream's write may end it inline, and its Detach changes sessions_.
  std::vector<ConnectReactor*> streams;
  for (const auto& [worker_id, session] : sessions_) {
    if (session.stream != nullptr && (model_hash.empty() || session.model_hash == model_hash)) {
      streams.push_back(session.stream);
    }
  }
  for (ConnectReactor* stream : streams) {
    if (streams_.contains(stream)) stream->Refill();
  }
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return AnswerOnPool(options_.pool, context, [=, this] { return DoRegister(*request, response); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::GetJobData(grpc::CallbackServerContext* context,
                                                        const v1::GetJobDataRequest* request,
                                                        v1::GetJobDataResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoGetJobData(*request, response); });
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* /*context*/) {
  auto* stream = new ConnectReactor(this);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  streams_.insert(stream);
  if (shutting_down_) {
    stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
  return stream;
}

}  // namespace ripplekv::scheduler::service
