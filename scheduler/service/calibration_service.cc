#include "scheduler/service/calibration_service.h"

#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "method/budget_format.h"
#include "scheduler/service/convert.h"

namespace ripplekv::scheduler::service {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A version field of a request: 0 = latest; beyond uint32 no version can exist.
StatusOr<uint32_t> ProfileVersionArg(int64_t version, std::string_view field) {
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": ", version, " is negative"));
  }
  if (version > std::numeric_limits<uint32_t>::max()) {
    return absl::NotFoundError(absl::StrCat(std::string(field), ": no version ", version));
  }
  return static_cast<uint32_t>(version);
}

void NowToProto(google::protobuf::Timestamp* out) {
  TimeMsToProto(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count(),
                out);
}

}  // namespace

// One WatchJob stream: a thread that writes the snapshot, then polls Progress and writes state
// changes and (throttled) progress until the job is terminal, the client cancels, or the service
// shuts down. Deletes itself in OnDone.
class CalibrationServiceImpl::WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(CalibrationServiceImpl* service, store::JobId job, JobProgress first)
      : service_(service), job_(job) {
    thread_ = std::thread([this, first = std::move(first)]() mutable { Run(std::move(first)); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    write_pending_ = false;
    write_ok_ = ok;
    cv_.notify_all();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

  void OnDone() override {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // Finish() ran OnDone inline; the thread touches nothing after it
    } else {
      thread_.join();
    }
    CalibrationServiceImpl* service = service_;
    delete this;
    std::lock_guard<std::mutex> lock(service->watch_mu_);
    --service->active_watches_;
    service->watch_cv_.notify_all();
  }

 private:
  // Writes one event and waits for it to be sent; false when the stream is broken or cancelled.
  bool Write(v1::JobEvent* event) {
    event->set_job_id(FormatJobId(job_));
    NowToProto(event->mutable_event_time());
    std::unique_lock<std::mutex> lock(mu_);
    if (cancelled_) return false;
    write_pending_ = true;
    StartWrite(event);
    cv_.wait(lock, [this] { return !write_pending_; });
    return write_ok_ && !cancelled_;
  }

  void Run(JobProgress first) {
    const CalibrationServiceOptions& options = service_->options_;
    v1::JobEvent event;
    *event.mutable_snapshot() = JobToProto(first);
    store::JobState state = first.job.state;
    v1::JobProgress last_progress = event.snapshot().progress();
    auto last_progress_time = std::chrono::steady_clock::now();
    grpc::Status end = grpc::Status::OK;
    bool open = Write(&event);
    while (open && !IsTerminal(state)) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(options.watch_poll_ms),
                     [this] { return cancelled_; });
        if (cancelled_) {
          open = false;
          break;
        }
      }
      if (service_->shutting_down_.load()) {
        end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down");
        break;
      }
      StatusOr<JobProgress> progress = service_->scheduler_->Progress(job_);
      if (!progress.ok()) {
        end = ToGrpcStatus(progress.status());
        break;
      }
      const v1::Job job = JobToProto(*progress);
      const auto now = std::chrono::steady_clock::now();
      const bool progressed =
          job.progress().SerializeAsString() != last_progress.SerializeAsString();
      const bool state_changed = progress->job.state != state;
      // Progress goes first so that the last counters precede a terminal state change.
      if (progressed &&
          (state_changed ||
           now - last_progress_time >= std::chrono::milliseconds(options.watch_progress_min_ms))) {
        event.Clear();
        *event.mutable_progress() = job.progress();
        last_progress = job.progress();
        last_progress_time = now;
        if (!(open = Write(&event))) break;
      }
      if (state_changed) {
        event.Clear();
        v1::JobStateChange* change = event.mutable_state_change();
        change->set_previous(JobStateToProto(state));
        change->set_current(job.state());
        if (job.has_error()) *change->mutable_error() = job.error();
        state = progress->job.state;
        if (!(open = Write(&event))) break;
      }
    }
    if (!open && end.ok()) end = grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
    Finish(end);
  }

  CalibrationServiceImpl* const service_;
  const store::JobId job_;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool write_pending_ = false;  // guarded by mu_
  bool write_ok_ = true;        // guarded by mu_
  bool cancelled_ = false;      // guarded by mu_
};

CalibrationServiceImpl::CalibrationServiceImpl(Scheduler* scheduler,
                                               CalibrationServiceOptions options)
    : scheduler_(scheduler), options_(std::move(options)) {}

CalibrationServiceImpl::~CalibrationServiceImpl() { Shutdown(); }

void CalibrationServiceImpl::Shutdown() {
  shutting_down_.store(true);
  std::unique_lock<std::mutex> lock(watch_mu_);
  // Each watch thread notices within one poll interval; a stream whose client stopped reading
  // may hold its thread longer, so the wait is bounded.
  watch_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return active_watches_ == 0; });
}

Status CalibrationServiceImpl::DoSubmitJob(const v1::SubmitJobRequest& request,
                                           v1::SubmitJobResponse* response) {
  ASSIGN_OR_RETURN(SubmitRequest submit, SubmitRequestFromProto(request));
  ASSIGN_OR_RETURN(SubmitOutcome outcome, scheduler_->SubmitJob(submit));
  *response->mutable_job() = JobToProto(outcome.job);
  response->set_existing(!outcome.created);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetJob(const v1::GetJobRequest& request, v1::Job* response) {
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(JobProgress progress, scheduler_->Progress(id));
  *response = JobToProto(progress);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListJobs(const v1::ListJobsRequest& request,
                                          v1::ListJobsResponse* response) {
  JobFilter filter;
  for (int i = 0; i < request.states_size(); ++i) {
    const std::optional<store::JobState> state =
        JobStateFromProto(static_cast<v1::JobState>(request.states(i)));
    if (!state) {
      return absl::InvalidArgumentError(
          absl::StrCat("states[", i, "]: ", request.states(i), " is not a job state"));
    }
    filter.states.push_back(*state);
  }
  if (!request.model_hash().empty())
    RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  filter.model_hash = request.model_hash();
  filter.page = {.page_size = request.page_size(), .page_token = request.page_token()};
  ASSIGN_OR_RETURN(JobPage page, scheduler_->ListJobs(filter));
  for (const store::Job& job : page.jobs) *response->add_jobs() = JobToProto(job);
  response->set_next_page_token(page.next_page_token);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoCancelJob(const v1::CancelJobRequest& request, v1::Job* response) {
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(CancelOutcome outcome, scheduler_->CancelJob(id, "cancelled by CancelJob"));
  if (!outcome.already_cancelled && options_.on_revocations) {
    options_.on_revocations(outcome.revocations);
  }
  *response = JobToProto(outcome.job);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetProfile(const v1::GetProfileRequest& request,
                                            v1::Profile* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(uint32_t version, ProfileVersionArg(request.version(), "version"));
  ASSIGN_OR_RETURN(StoredProfile profile, scheduler_->GetProfile(request.model_hash(), version));
  *response = ProfileToProto(profile, /*with_layers=*/true);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListProfiles(const v1::ListProfilesRequest& request,
                                              v1::ListProfilesResponse* response) {
  if (!request.model_hash().empty())
    RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(
      ProfilePage page,
      scheduler_->ListProfiles(request.model_hash(), {.page_size = request.page_size(),
                                                      .page_token = request.page_token()}));
  for (const StoredProfile& profile : page.profiles) {
    *response->add_profiles() = ProfileToProto(profile, /*with_layers=*/false);
  }
  response->set_next_page_token(page.next_page_token);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetBudgetMap(const v1::GetBudgetMapRequest& request,
                                              v1::BudgetMap* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(uint32_t version,
                   ProfileVersionArg(request.profile_version(), "profile_version"));
  if (!request.has_params()) return absl::InvalidArgumentError("params is required");
  ASSIGN_OR_RETURN(BudgetRequest budget, BudgetRequestFromProto(request.params()));
  ASSIGN_OR_RETURN(ProfileBudgetMap result,
                   scheduler_->GetBudgetMap(request.model_hash(), version, budget.options));
  ASSIGN_OR_RETURN(std::string formatted,
                   method::FormatBudgetMap(result.map, budget.format, budget.context_len));
  *response = BudgetMapToProto(result.map, budget, result.profile.version, formatted);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                            const v1::SubmitJobRequest* request,
                                                            v1::SubmitJobResponse* response) {
  return Answer(context, DoSubmitJob(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                         const v1::GetJobRequest* request,
                                                         v1::Job* response) {
  return Answer(context, DoGetJob(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                           const v1::ListJobsRequest* request,
                                                           v1::ListJobsResponse* response) {
  return Answer(context, DoListJobs(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                            const v1::CancelJobRequest* request,
                                                            v1::Job* response) {
  return Answer(context, DoCancelJob(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetProfile(grpc::CallbackServerContext* context,
                                                             const v1::GetProfileRequest* request,
                                                             v1::Profile* response) {
  return Answer(context, DoGetProfile(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListProfiles(
    grpc::CallbackServerContext* context, const v1::ListProfilesRequest* request,
    v1::ListProfilesResponse* response) {
  return Answer(context, DoListProfiles(*request, response));
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetBudgetMap(
    grpc::CallbackServerContext* context, const v1::GetBudgetMapRequest* request,
    v1::BudgetMap* response) {
  return Answer(context, DoGetBudgetMap(*request, response));
}

grpc::ServerWriteReactor<v1::JobEvent>* CalibrationServiceImpl::WatchJob(
    grpc::CallbackServerContext* /*context*/, const v1::WatchJobRequest* request) {
  Status status = absl::OkStatus();
  StatusOr<store::JobId> id = ParseJobId(request->job_id(), "job_id");
  StatusOr<JobProgress> first = absl::UnknownError("unset");
  if (!id.ok()) {
    status = id.status();
  } else if (shutting_down_.load()) {
    status = absl::UnavailableError("the scheduler is shutting down");
  } else {
    first = scheduler_->Progress(*id);
    status = first.status();
  }
  if (!status.ok()) {
    class Refusal final : public grpc::ServerWriteReactor<v1::JobEvent> {
     public:
      explicit Refusal(const Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    return new Refusal(status);
  }
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    ++active_watches_;
  }
  return new WatchReactor(this, *id, std::move(*first));
}

}  // namespace ripplekv::scheduler::service
