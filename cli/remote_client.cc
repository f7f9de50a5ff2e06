#include "cli/remote_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/client_channel.h"

namespace ripplekv::cli {

void SetDeadline(grpc::ClientContext& context, std::chrono::seconds deadline) {
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

method::SensitivityProfile ProfileFromProto(const v1::Profile& p) {
  method::SensitivityProfile out;
  const v1::ModelInfo& m = p.model();
  out.model = {.hash = p.model_hash(),
               .architecture = m.architecture(),
               .name = m.name(),
               .n_layers = m.n_layers(),
               .n_kv_heads = m.n_kv_heads(),
               .head_dim = m.head_dim(),
               .d_model = m.d_model(),
               .vocab_size = m.vocab_size()};
  const v1::CalibrationParams& params = p.params();
  out.params.mode = params.mode() == v1::PERTURB_MODE_PREFILL ? method::PerturbMode::kPrefill
                                                              : method::PerturbMode::kCache;
  out.params.alpha = params.alpha();
  out.params.trials = params.trials();
  out.params.seed = params.seed();
  out.params.samples = params.samples();
  out.params.context_len = params.context_len();
  out.params.probe_len = params.probe_len();
  for (int32_t l : params.layers()) out.params.layers.push_back(l);
  out.params.data_source = p.data_source();
  out.params.data_domain = p.data_domain();
  for (const v1::LayerSensitivity& l : p.layers()) {
    method::LayerSensitivity layer;
    layer.layer = l.layer();
    layer.mean_kl = l.mean_kl();
    layer.std_error = l.std_error();
    layer.count = l.count();
    layer.per_sample_mean.assign(l.per_sample_mean().begin(), l.per_sample_mean().end());
    out.layers.push_back(std::move(layer));
  }
  out.created_at = method::FormatIso8601Utc(
      std::chrono::system_clock::time_point(std::chrono::seconds(p.create_time().seconds())));
  out.tool_version = p.tool_version();
  if (p.has_stability()) {
    const v1::ProfileStability& s = p.stability();
    method::ProfileStability st{.seed = s.seed(),
                                .resamples = s.resamples(),
                                .level = s.level(),
                                .ratio = s.ratio(),
                                .tolerance = s.tolerance()};
    for (const v1::LayerStability& l : s.layers()) {
      st.layers.push_back({.layer = l.layer(),
                           .kl_low = l.kl_low(),
                           .kl_high = l.kl_high(),
                           .share = l.share(),
                           .share_low = l.share_low(),
                           .share_high = l.share_high()});
    }
    st.rank_correlation_median = s.rank_correlation_median();
    st.rank_correlation_low = s.rank_correlation_low();
    st.top_layer = s.top_layer();
    st.top_layer_frequency = s.top_layer_frequency();
    st.max_share_deviation = s.max_share_deviation();
    st.stable = s.stable();
    out.stability = std::move(st);
  }
  if (p.has_verification()) {
    const v1::ProfileVerification& v = p.verification();
    method::ProfileVerification pv{
        .fraction = v.fraction(),
        .tasks_verified = static_cast<uint64_t>(v.tasks_verified()),
        .tasks_unverified = static_cast<uint64_t>(v.tasks_unverified()),
        .tasks_recomputed = static_cast<uint64_t>(v.tasks_recomputed())};
    for (const v1::ProfileVerification::Disagreement& d : v.disagreements()) {
      pv.disagreements.push_back(
          {.sample = static_cast<uint32_t>(d.sample()),
           .layer = static_cast<uint32_t>(d.layer()),
           .outvoted_worker = d.outvoted_worker(),
           .agreeing_workers = {d.agreeing_workers().begin(), d.agreeing_workers().end()}});
    }
    out.verification = std::move(pv);
  }
  return out;
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
