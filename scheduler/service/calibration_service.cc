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

}  // namespace

CalibrationServiceImpl::CalibrationServiceImpl(Scheduler* scheduler,
                                               CalibrationServiceOptions options)
    : scheduler_(scheduler), options_(std::move(options)), watchers_(scheduler, options_.watch) {}

CalibrationServiceImpl::~CalibrationServiceImpl() { Shutdown(); }

void CalibrationServiceImpl::Shutdown() { watchers_.Shutdown(); }

Status CalibrationServiceImpl::DoSubmitJob(const v1::SubmitJobRequest& request,
                                           v1::SubmitJobResponse* response) {
  ASSIGN_OR_RETURN(SubmitRequest submit, SubmitRequestFromProto(request));
  ASSIGN_OR_RETURN(SubmitOutcome outcome, scheduler_->SubmitJob(submit));
  *response->mutable_job() = JobToProto(outcome.job);
  response->set_existing(!outcome.created);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetJob(const v1::GetJobRequest& request, v1::Job* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "GetJob"));
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(JobProgress progress, scheduler_->Progress(id));
  *response = JobToProto(progress);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListJobs(const v1::ListJobsRequest& request,
                                          v1::ListJobsResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "ListJobs"));
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

Status CalibrationServiceImpl::DoListJobTasks(const v1::ListJobTasksRequest& request,
                                              v1::ListJobTasksResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "ListJobTasks"));
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(TaskPage page,
                   scheduler_->ListTasks(id, {.page_size = request.page_size(),
                                              .page_token = request.page_token()}));
  for (const store::Task& task : page.tasks) *response->add_tasks() = TaskToProto(task);
  response->set_next_page_token(page.next_page_token);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListWorkers(const v1::ListWorkersRequest& request,
                                             v1::ListWorkersResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "ListWorkers"));
  ASSIGN_OR_RETURN(WorkerPage page, scheduler_->ListWorkers({.page_size = request.page_size(),
                                                             .page_token = request.page_token()}));
  for (const WorkerInfo& info : page.workers) *response->add_workers() = WorkerInfoToProto(info);
  response->set_next_page_token(page.next_page_token);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoCancelJob(const v1::CancelJobRequest& request, v1::Job* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "CancelJob"));
  ASSIGN_OR_RETURN(store::JobId id, ParseJobId(request.job_id(), "job_id"));
  ASSIGN_OR_RETURN(CancelOutcome outcome, scheduler_->CancelJob(id, "cancelled by CancelJob"));
  if (!outcome.already_cancelled && options_.on_cancelled) options_.on_cancelled();
  *response = JobToProto(outcome.job);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoGetProfile(const v1::GetProfileRequest& request,
                                            v1::Profile* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "GetProfile"));
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(uint32_t version, ProfileVersionArg(request.version(), "version"));
  ASSIGN_OR_RETURN(StoredProfile profile, scheduler_->GetProfile(request.model_hash(), version));
  *response = ProfileToProto(profile, /*with_layers=*/true);
  return absl::OkStatus();
}

Status CalibrationServiceImpl::DoListProfiles(const v1::ListProfilesRequest& request,
                                              v1::ListProfilesResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "ListProfiles"));
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
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "GetBudgetMap"));
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
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoSubmitJob(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                         const v1::GetJobRequest* request,
                                                         v1::Job* response) {
  return AnswerOnPool(options_.pool, context, [=, this] { return DoGetJob(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                           const v1::ListJobsRequest* request,
                                                           v1::ListJobsResponse* response) {
  return AnswerOnPool(options_.pool, context, [=, this] { return DoListJobs(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListJobTasks(
    grpc::CallbackServerContext* context, const v1::ListJobTasksRequest* request,
    v1::ListJobTasksResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoListJobTasks(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListWorkers(
    grpc::CallbackServerContext* context, const v1::ListWorkersRequest* request,
    v1::ListWorkersResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoListWorkers(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                            const v1::CancelJobRequest* request,
                                                            v1::Job* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoCancelJob(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetProfile(grpc::CallbackServerContext* context,
                                                             const v1::GetProfileRequest* request,
                                                             v1::Profile* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoGetProfile(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::ListProfiles(
    grpc::CallbackServerContext* context, const v1::ListProfilesRequest* request,
    v1::ListProfilesResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoListProfiles(*request, response); });
}

grpc::ServerUnaryReactor* CalibrationServiceImpl::GetBudgetMap(
    grpc::CallbackServerContext* context, const v1::GetBudgetMapRequest* request,
    v1::BudgetMap* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoGetBudgetMap(*request, response); });
}

grpc::ServerWriteReactor<v1::JobEvent>* CalibrationServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  StatusOr<store::JobId> id = ParseJobId(request->job_id(), "job_id");
  StatusOr<JobProgress> first = id.ok() ? scheduler_->Progress(*id) : id.status();
  if (!first.ok()) {
    class Refusal final : public grpc::ServerWriteReactor<v1::JobEvent> {
     public:
      explicit Refusal(const Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    return new Refusal(first.status());
  }
  return watchers_.Watch(context, *id, *first);
}

}  // namespace ripplekv::scheduler::service
