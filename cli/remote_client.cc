#include "cli/remote_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/client_channel.h"

namespace ripplekv::cli {

void SetDeadline(grpc::ClientContext& context, std::chrono::milliseconds deadline) {
  context.set_deadline(std::chrono::system_clock::now() + deadline);
}

Status FromGrpc(const grpc::Status& status, const std::string& address, bool plaintext) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(
        code, absl::StrCat("scheduler ", address, ": ", status.error_message(),
                           std::string(v1::TlsHintFor(status.error_code(), status.error_message(),
                                                      plaintext))));
  }
  return absl::Status(code, status.error_message());
}

RemoteClient::RemoteClient(const std::string& address, const v1::ClientChannelOptions& options)
    : address_(address),
      plaintext_(v1::IsPlaintext(options)),
      stub_(v1::CalibrationService::NewStub(v1::MakeClientChannel(address, options))) {}

StatusOr<RemoteClient> RemoteClient::Connect(const std::string& address,
                                             const v1::ClientSecurityFiles& files) {
  v1::ClientChannelOptions options;
  RETURN_IF_ERROR(v1::LoadClientSecurity(files, options));
  return RemoteClient(address, options);
}

StatusOr<v1::SubmitJobResponse> RemoteClient::SubmitJob(const v1::SubmitJobRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context, kSubmitDeadline);
  v1::SubmitJobResponse response;
  RETURN_IF_ERROR(FromGrpc(stub_->SubmitJob(&context, request, &response), address_, plaintext_));
  return response;
}

StatusOr<v1::Job> RemoteClient::GetJob(const std::string& job_id) {
  grpc::ClientContext context;
  SetDeadline(context, kUnaryDeadline);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(FromGrpc(stub_->GetJob(&context, request, &job), address_, plaintext_));
  return job;
}

StatusOr<std::vector<v1::Job>> RemoteClient::ListJobs() {
  return AllPages(address_, plaintext_, stub_.get(), &v1::CalibrationService::Stub::ListJobs,
                  v1::ListJobsRequest(), &v1::ListJobsResponse::mutable_jobs);
}

StatusOr<std::vector<v1::JobTask>> RemoteClient::ListJobTasks(const std::string& job_id) {
  v1::ListJobTasksRequest request;
  request.set_job_id(job_id);
  return AllPages(address_, plaintext_, stub_.get(), &v1::CalibrationService::Stub::ListJobTasks,
                  request, &v1::ListJobTasksResponse::mutable_tasks);
}

StatusOr<std::vector<v1::WorkerStatus>> RemoteClient::ListWorkers() {
  return AllPages(address_, plaintext_, stub_.get(), &v1::CalibrationService::Stub::ListWorkers,
                  v1::ListWorkersRequest(), &v1::ListWorkersResponse::mutable_workers);
}

StatusOr<v1::Job> RemoteClient::CancelJob(const std::string& job_id) {
  grpc::ClientContext context;
  SetDeadline(context, kUnaryDeadline);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  RETURN_IF_ERROR(FromGrpc(stub_->CancelJob(&context, request, &job), address_, plaintext_));
  return job;
}

StatusOr<v1::Profile> RemoteClient::GetProfile(const std::string& model_hash, int64_t version) {
  grpc::ClientContext context;
  SetDeadline(context, kUnaryDeadline);
  v1::GetProfileRequest request;
  request.set_model_hash(model_hash);
  request.set_version(version);
  v1::Profile profile;
  RETURN_IF_ERROR(FromGrpc(stub_->GetProfile(&context, request, &profile), address_, plaintext_));
  return profile;
}

StatusOr<std::vector<v1::Profile>> RemoteClient::ListProfiles(const std::string& model_hash) {
  v1::ListProfilesRequest request;
  request.set_model_hash(model_hash);
  return AllPages(address_, plaintext_, stub_.get(), &v1::CalibrationService::Stub::ListProfiles,
                  request, &v1::ListProfilesResponse::mutable_profiles);
}

StatusOr<v1::BudgetMap> RemoteClient::GetBudgetMap(const v1::GetBudgetMapRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context, kUnaryDeadline);
  v1::BudgetMap map;
  RETURN_IF_ERROR(FromGrpc(stub_->GetBudgetMap(&context, request, &map), address_, plaintext_));
  return map;
}

Status RemoteClient::WatchJob(const std::string& job_id,
                              const std::function<void(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) on_event(event);
  return FromGrpc(reader->Finish(), address_, plaintext_);
}

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_PENDING:
      return "PENDING";
    case v1::JOB_STATE_RUNNING:
      return "RUNNING";
    case v1::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case v1::JOB_STATE_FAILED:
      return "FAILED";
    case v1::JOB_STATE_CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

}  // namespace ripplekv::cli
