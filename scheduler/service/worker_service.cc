#include "scheduler/service/worker_service.h"

#include <chrono>
#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "scheduler/service/convert.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

void MsToDuration(int64_t ms, google::protobuf::Duration* out) {
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1'000'000));
}

// TaskDone.error codes that fail the job (worker.proto); others put the task back.
bool FailsJob(int32_t code) {
  const auto c = static_cast<absl::StatusCode>(code);
  return c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kFailedPrecondition ||
         c == absl::StatusCode::kDataLoss;
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

  void CancelTask(const store::TaskKey& key, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = leases_.find(key);
      if (it == leases_.end()) return;
      v1::SchedulerMessage message;
      message.mutable_task_cancellation()->set_task_id(it->second);
      message.mutable_task_cancellation()->set_reason(reason);
      leases_.erase(it);
      Enqueue(std::move(message));
    }
    Pump();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker half-closed or went away
      Close(grpc::Status::OK);
      return;
    }
    Status status = absl::OkStatus();
    if (!attached_) {
      // Attach locks the service; the service locks streams (Revoke, Register) in that order,
      // so this runs without mu_. Reads are serialized, so attached_ needs no lock.
      status = Hello(in_);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      status = Handle(in_);
    }
    if (!status.ok()) {
      Close(ToGrpcStatus(status));
      return;
    }
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
    attached_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    return Fill();
  }

  // Requires mu_. Non-OK ends the stream with that status.
  Status Handle(const v1::WorkerMessage& message) {
    switch (message.kind_case()) {
      case v1::WorkerMessage::kHello:
        return absl::FailedPreconditionError("hello sent twice on one stream");
      case v1::WorkerMessage::kHeartbeat: {
        held_.clear();
        for (const v1::CachedSample& sample : message.heartbeat().cached_samples()) {
          StatusOr<store::JobId> job = ParseJobId(sample.job_id(), "cached_samples.job_id");
          if (job.ok() && sample.sample() >= 0) {
            held_.push_back({*job, static_cast<uint32_t>(sample.sample())});
          }
        }
        RETURN_IF_ERROR(Alive());
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
        Result(message.trial_result());
        return absl::OkStatus();
      case v1::WorkerMessage::kTaskDone:
        return Done(message.task_done());
      case v1::WorkerMessage::kDraining:
        draining_ = true;
        return absl::OkStatus();
      case v1::WorkerMessage::KIND_NOT_SET:
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // Heartbeat with the prefills last reported: renews leases and forgets lost ones.
  Status Alive() {
    Status status = service_->scheduler_->Heartbeat(worker_id_, held_);
    if (absl::IsNotFound(status)) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker_id_, " is not registered (timed out?); register again"));
    }
    return status;
  }

  // Sends assignments while the scheduler has work for this worker and it has capacity.
  Status Fill() {
    if (draining_ || closing_) return absl::OkStatus();
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
      leases_[assignment.key] = message.task_assignment().task_id();
      Enqueue(std::move(message));
    }
  }

  // The task's lease goes back to pending (or the job fails when `fail_job`).
  void GiveBack(const store::TaskKey& key, bool fail_job, const std::string& why) {
    leases_.erase(key);
    if (fail_job) {
      Status failed = service_->scheduler_->FailJob(key.job, why);
      if (!failed.ok()) spdlog::warn("failing job {}: {}", key.job, failed.ToString());
    } else {
      Status released = service_->scheduler_->ReleaseTask(worker_id_, key);
      if (!released.ok()) spdlog::debug("releasing task: {}", released.ToString());
    }
    // The scheduler forgets leases that are gone on the next heartbeat; do it now.
    Status status = Alive();
    if (!status.ok()) spdlog::debug("heartbeat after give-back: {}", status.ToString());
  }

  Status Refused(const v1::TaskRefused& refused) {
    StatusOr<store::TaskKey> key = ParseTaskId(refused.task_id(), "task_refused.task_id");
    if (!key.ok()) {
      spdlog::warn("worker {}: {}", worker_id_, key.status().ToString());
      return absl::OkStatus();
    }
    spdlog::info("worker {} refused task {} ({}): {}", worker_id_, refused.task_id(),
                 v1::RefusalReason_Name(refused.reason()), refused.message());
    switch (refused.reason()) {
      case v1::REFUSAL_REASON_INVALID_TASK:
        GiveBack(*key, /*fail_job=*/true,
                 absl::StrCat("worker ", worker_id_, " refused task ", refused.task_id(),
                              " as invalid: ", refused.message()));
        break;
      case v1::REFUSAL_REASON_DRAINING:
        draining_ = true;
        GiveBack(*key, /*fail_job=*/false, {});
        break;
      case v1::REFUSAL_REASON_MODEL_HASH_MISMATCH:
      case v1::REFUSAL_REASON_DATA_UNAVAILABLE:
      case v1::REFUSAL_REASON_INSUFFICIENT_MEMORY: {
        // The job as a whole cannot run here; other jobs can. A job whose data no worker of its
        // model can read, or that no such worker has the memory for, fails rather than circling
        // (worker.proto, RefusalReason).
        leases_.erase(*key);
        const bool memory = refused.reason() == v1::REFUSAL_REASON_INSUFFICIENT_MEMORY;
        const bool fail_if_none_left =
            memory || refused.reason() == v1::REFUSAL_REASON_DATA_UNAVAILABLE;
        StatusOr<bool> failed = service_->scheduler_->RefuseJob(
            worker_id_, *key, fail_if_none_left,
            absl::StrCat(memory ? "no worker has the memory for the job"
                                : "every worker refused the job's data",
                         "; last: worker ", worker_id_, ": ", refused.message()));
        if (!failed.ok()) {
          spdlog::warn("worker {}: refusal of task {}: {}", worker_id_, refused.task_id(),
                       failed.status().ToString());
        } else if (*failed) {
          spdlog::warn("job {} failed: {}", key->job,
                       memory ? "no worker has the memory for it" : "no worker can read its data");
        }
        return Fill();
      }
      default:
        GiveBack(*key, /*fail_job=*/false, {});
        break;
    }
    return absl::OkStatus();
  }

  void Result(const v1::TrialResult& result) {
    StatusOr<store::TaskKey> key = ParseTaskId(result.task_id(), "trial_result.task_id");
    if (!key.ok() || result.trial() < 0 || result.sample() < 0 || result.layer() < 0 ||
        FormatJobId(key->job) != result.job_id() ||
        key->sample != static_cast<uint32_t>(result.sample()) ||
        key->layer != static_cast<uint32_t>(result.layer())) {
      spdlog::warn("worker {}: trial_result for task \"{}\" does not match its task; dropped",
                   worker_id_, result.task_id());
      return;
    }
    const store::TrialResult trial{key->job, key->sample, key->layer,
                                   static_cast<uint32_t>(result.trial()), result.kl()};
    StatusOr<TaskResultsOutcome> outcome = service_->scheduler_->TaskResults(
        worker_id_, *key, std::span<const store::TrialResult>(&trial, 1), /*done=*/false);
    if (!outcome.ok()) {
      spdlog::warn("worker {}: result of task {} trial {}: {}", worker_id_, result.task_id(),
                   result.trial(), outcome.status().ToString());
    }
  }

  Status Done(const v1::TaskDone& done) {
    StatusOr<store::TaskKey> key = ParseTaskId(done.task_id(), "task_done.task_id");
    if (!key.ok()) {
      spdlog::warn("worker {}: {}", worker_id_, key.status().ToString());
      return absl::OkStatus();
    }
    if (done.has_error() && done.error().code() != 0) {
      GiveBack(*key, FailsJob(done.error().code()),
               absl::StrCat("task ", done.task_id(), " failed on worker ", worker_id_, ": ",
                            done.error().message()));
      return Fill();
    }
    leases_.erase(*key);
    if (!done.data_description().empty()) {
      StatusOr<bool> same =
          service_->scheduler_->DescribeJobData(key->job, done.data_description());
      if (!same.ok()) {
        spdlog::warn("worker {}: data description of job {}: {}", worker_id_, key->job,
                     same.status().ToString());
      } else if (!*same) {
        // Workers derived different samples from the same data: their results would not agree.
        spdlog::warn("worker {} describes job {}'s data as \"{}\", unlike the first report",
                     worker_id_, key->job, done.data_description());
      }
    }
    StatusOr<TaskResultsOutcome> outcome =
        service_->scheduler_->TaskResults(worker_id_, *key, {}, /*done=*/true);
    if (!outcome.ok()) {
      spdlog::warn("worker {}: task {} done: {}", worker_id_, done.task_id(),
                   outcome.status().ToString());
    } else if (outcome->job_succeeded) {
      spdlog::info("job {} succeeded: profile version {}", key->job, outcome->profile_version);
    }
    return Fill();
  }

  WorkerServiceImpl* const service_;
  v1::WorkerMessage in_;   // one read in flight at a time
  bool attached_ = false;  // hello accepted; touched by the (serialized) reads only

  std::mutex mu_;
  std::string worker_id_;                         // set by hello; guarded by mu_
  std::vector<PrefillKey> held_;                  // last heartbeat's prefills; guarded by mu_
  std::map<store::TaskKey, std::string> leases_;  // task ids sent; guarded by mu_
  std::deque<v1::SchedulerMessage> out_;          // front is being written when writing_
  bool writing_ = false;
  bool draining_ = false;
  bool closing_ = false;
  bool finish_called_ = false;
  std::optional<grpc::Status> pending_finish_;
};

WorkerServiceImpl::WorkerServiceImpl(Scheduler* scheduler, WorkerServiceOptions options)
    : scheduler_(scheduler), options_(options) {}

WorkerServiceImpl::~WorkerServiceImpl() { Shutdown(); }

void WorkerServiceImpl::Shutdown() {
  std::unique_lock<std::recursive_mutex> lock(mu_);
  shutting_down_ = true;
  const std::vector<ConnectReactor*> streams(streams_.begin(), streams_.end());
  for (ConnectReactor* stream : streams) {
    stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
  streams_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return streams_.empty(); });
}

void WorkerServiceImpl::Revoke(const std::vector<Revocation>& revocations) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (const Revocation& revocation : revocations) {
    auto it = sessions_.find(revocation.worker_id);
    if (it == sessions_.end() || it->second.stream == nullptr) continue;
    it->second.stream->CancelTask(revocation.key, "job cancelled");
  }
}

Status WorkerServiceImpl::DoRegister(const v1::RegisterRequest& request,
                                     v1::RegisterResponse* response) {
  ASSIGN_OR_RETURN(WorkerRegistration registration, RegistrationFromProto(request));
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  RETURN_IF_ERROR(scheduler_->RegisterWorker(registration));
  Session& session = sessions_[registration.worker_id];
  ConnectReactor* retired = session.stream;
  session.session_id = absl::StrCat(registration.worker_id, "#", next_session_++);
  session.stream = nullptr;
  if (retired != nullptr) {
    retired->Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                "session superseded by a newer Register of this worker"));
  }
  response->set_session_id(session.session_id);
  MsToDuration(options_.heartbeat_interval_ms, response->mutable_heartbeat_interval());
  MsToDuration(options_.lease_timeout_ms, response->mutable_lease_timeout());
  spdlog::info("worker {} registered (capacity {}, model {}, {}{})", registration.worker_id,
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
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(store::JobSpec spec, scheduler_->JobData(id));
  CalibrationDataToProto(spec, /*with_inline_data=*/true, response->mutable_data());
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
  sessions_.erase(it);
  Status status = scheduler_->WorkerGone(stream->worker_id());
  if (!status.ok() && !absl::IsNotFound(status)) {
    spdlog::warn("worker {} gone: {}", stream->worker_id(), status.ToString());
  } else {
    spdlog::info("worker {} disconnected; its leases return to pending", stream->worker_id());
  }
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return Answer(context, DoRegister(*request, response));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::GetJobData(grpc::CallbackServerContext* context,
                                                        const v1::GetJobDataRequest* request,
                                                        v1::GetJobDataResponse* response) {
  return Answer(context, DoGetJobData(*request, response));
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
