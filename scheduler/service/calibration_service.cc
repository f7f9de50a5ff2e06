#include "scheduler/service/calibration_service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "scheduler/service/convert.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr int32_t kDefaultPageSize = 50;
constexpr int32_t kMaxPageSize = 1000;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

StatusOr<int32_t> PageSize(int32_t page_size) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", page_size, " is negative"));
  }
  if (page_size == 0) return kDefaultPageSize;
  return std::min(page_size, kMaxPageSize);
}

// Page tokens are the decimal offset of the page's first item in the listing.
StatusOr<size_t> PageOffset(const std::string& token) {
  if (token.empty()) return size_t{0};
  size_t offset = 0;
  for (char c : token) {
    if (c < '0' || c > '9' || offset > (std::numeric_limits<size_t>::max() - 9) / 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token: \"", token.substr(0, 80), "\" is not a token of this server"));
    }
    offset = offset * 10 + static_cast<size_t>(c - '0');
  }
  return offset;
}

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

CalibrationServiceImpl::CalibrationServiceImpl(Scheduler* scheduler, store::Store* store,
                                               CalibrationServiceOptions options)
    : scheduler_(scheduler), store_(store), options_(std::move(options)) {}

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
  bool existing = false;
  if (!submit.spec.idempotency_key.empty()) {
    // The core returns an equal job for a reused key; tell the caller it is not new.
    ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs());
    existing = std::any_of(jobs.begin(), jobs.end(), [&](const store::Job& job) {
      return job.spec.idempotency_key == submit.spec.idempotency_key;
    });
  }
  ASSIGN_OR_RETURN(store::Job job, scheduler_->SubmitJob(submit));
  *response->mutable_job() = JobToProto(job);
  response->set_existing(existing);
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
  ASSIGN_OR_RETURN(int32_t page_size, PageSize(request.page_size()));
  ASSIGN_OR_RETURN(size_t offset, PageOffset(request.page_token()));
  std::vector<store::JobState> states;
  for (int i = 0; i < request.states_size(); ++i) {
    const std::optional<store::JobState> state =
        JobStateFromProto(static_cast<v1::JobState>(request.states(i)));
    if (!state) {
      return absl::InvalidArgumentError(
          absl::StrCat("states[", i, "]: ", request.states(i), " is not a job state"));
    }
    states.push_back(*state);
  }
  if (!request.model_hash().empty())
    RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs());
  std::erase_if(jobs, [&](const store::Job& job) {
    if (!states.empty() && std::find(states.begin(), states.end(), job.state) == states.end()) {
      return true;
    }
    return !request.model_hash().empty() && job.spec.model_hash != request.model_hash();
  });
  // Newest first: by create time, then id, both descending.
  std::sort(jobs.begin(), jobs.end(), [](const store::Job& a, const store::Job& b) {
    if (a.created_at_ms != b.created_at_ms) return a.created_at_ms > b.created_at_ms;
    return a.id > b.id;
  });
  const size_t end = std::min(jobs.size(), offset + static_cast<size_t>(page_size));
  for (size_t i = offset; i < end; ++i) *response->add_jobs() = JobToProto(jobs[i]);
  if (end < jobs.size()) response->set_next_page_token(absl::StrCat(end));
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoCancelJob(const v1::CancelJobRequest& request, v1::Job* response) {
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(store::Job before, store_->GetJob(id));
  if (before.state != store::JobState::kCancelled) {
    ASSIGN_OR_RETURN(std::vector<Revocation> revocations,
                     scheduler_->CancelJob(id, "cancelled by CancelJob"));
    if (options_.on_revocations) options_.on_revocations(revocations);
  }
  ASSIGN_OR_RETURN(store::Job job, store_->GetJob(id));
  *response = JobToProto(job);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetProfile(const v1::GetProfileRequest& request,
                                            v1::Profile* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(uint32_t version, ProfileVersionArg(request.version(), "version"));
  ASSIGN_OR_RETURN(store::ProfileVersion record, store_->GetProfile(request.model_hash(), version));
  StatusOr<method::SensitivityProfile> profile = method::ProfileFromJson(record.profile_json);
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile ", record.model_hash, " version ",
                                            record.version, ": ", profile.status().message()));
  }
  *response = ProfileToProto(*profile, record, /*with_layers=*/true);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListProfiles(const v1::ListProfilesRequest& request,
                                              v1::ListProfilesResponse* response) {
  if (!request.model_hash().empty())
    RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(int32_t page_size, PageSize(request.page_size()));
  ASSIGN_OR_RETURN(size_t offset, PageOffset(request.page_token()));
  ASSIGN_OR_RETURN(std::vector<store::ProfileVersion> records,
                   store_->ListProfiles(request.model_hash()));
  // By hash, then version descending.
  std::sort(records.begin(), records.end(),
            [](const store::ProfileVersion& a, const store::ProfileVersion& b) {
              if (a.model_hash != b.model_hash) return a.model_hash < b.model_hash;
              return a.version > b.version;
            });
  const size_t end = std::min(records.size(), offset + static_cast<size_t>(page_size));
  for (size_t i = offset; i < end; ++i) {
    StatusOr<method::SensitivityProfile> profile = method::ProfileFromJson(records[i].profile_json);
    if (!profile.ok()) {
      return absl::DataLossError(absl::StrCat("stored profile ", records[i].model_hash, " version ",
                                              records[i].version, ": ",
                                              profile.status().message()));
    }
    *response->add_profiles() = ProfileToProto(*profile, records[i], /*with_layers=*/false);
  }
  if (end < records.size()) response->set_next_page_token(absl::StrCat(end));
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetBudgetMap(const v1::GetBudgetMapRequest& request,
                                              v1::BudgetMap* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(uint32_t version,
                   ProfileVersionArg(request.profile_version(), "profile_version"));
  if (!request.has_params()) return absl::InvalidArgumentError("params is required");
  ASSIGN_OR_RETURN(BudgetRequest budget, BudgetRequestFromProto(request.params()));
  ASSIGN_OR_RETURN(store::ProfileVersion record, store_->GetProfile(request.model_hash(), version));
  StatusOr<method::SensitivityProfile> profile = method::ProfileFromJson(record.profile_json);
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile ", record.model_hash, " version ",
                                            record.version, ": ", profile.status().message()));
  }
  // A budget map covers every layer; a profile of some layers only cannot give one.
  const std::vector<int64_t>& layers = profile->params.layers;
  for (int64_t l = 0; l < profile->model.n_layers; ++l) {
    if (static_cast<size_t>(l) >= layers.size() || layers[static_cast<size_t>(l)] != l) {
      return absl::FailedPreconditionError(absl::StrCat(
          "profile ", record.model_hash, " version ", record.version, " does not cover layer ", l,
          " of ", profile->model.n_layers, "; a budget map needs every layer"));
    }
  }
  ASSIGN_OR_RETURN(method::BudgetMap map, method::ComputeBudgetMap(*profile, budget.options));
  ASSIGN_OR_RETURN(std::string formatted, method::FormatBudgetMap(map, budget.format, budget.context_len));
  *response = BudgetMapToProto(map, budget, record.version, formatted);
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
