#include "cli/rollout_client.h"

#include <utility>

#include "cli/remote_client.h"
#include "grpcpp/grpcpp.h"

namespace ripplekv::cli {

RolloutClient::RolloutClient(const std::string& address, const v1::ClientChannelOptions& options)
    : address_(address),
      plaintext_(v1::IsPlaintext(options)),
      stub_(v1::RolloutService::NewStub(v1::MakeClientChannel(address, options))) {}

StatusOr<RolloutClient> RolloutClient::Connect(const std::string& address,
                                               const v1::ClientSecurityFiles& files) {
  v1::ClientChannelOptions options;
  RETURN_IF_ERROR(v1::LoadClientSecurity(files, options));
  return RolloutClient(address, options);
}

StatusOr<v1::CreateBudgetMapResponse> RolloutClient::CreateBudgetMap(
    const v1::CreateBudgetMapRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context, kCreateMapDeadline);
  v1::CreateBudgetMapResponse response;
  RETURN_IF_ERROR(
      FromGrpc(stub_->CreateBudgetMap(&context, request, &response), address_, plaintext_));
  return response;
}

StatusOr<v1::BudgetMapVersion> RolloutClient::GetBudgetMap(const std::string& model_hash,
                                                           const std::string& version) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::GetBudgetMapVersionRequest request;
  request.set_model_hash(model_hash);
  request.set_version(version);
  v1::BudgetMapVersion map;
  RETURN_IF_ERROR(FromGrpc(stub_->GetBudgetMap(&context, request, &map), address_, plaintext_));
  return map;
}

StatusOr<std::vector<v1::BudgetMapVersion>> RolloutClient::ListBudgetMaps(
    const std::string& model_hash) {
  v1::ListBudgetMapVersionsRequest request;
  request.set_model_hash(model_hash);
  return AllPages(address_, plaintext_, stub_.get(), &v1::RolloutService::Stub::ListBudgetMaps,
                  request, &v1::ListBudgetMapVersionsResponse::mutable_maps, kRolloutCallDeadline);
}

StatusOr<v1::Rollout> RolloutClient::CreateRollout(const v1::CreateRolloutRequest& request) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::Rollout rollout;
  RETURN_IF_ERROR(
      FromGrpc(stub_->CreateRollout(&context, request, &rollout), address_, plaintext_));
  return rollout;
}

StatusOr<v1::Rollout> RolloutClient::GetRollout(const std::string& rollout_id) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::GetRolloutRequest request;
  request.set_rollout_id(rollout_id);
  v1::Rollout rollout;
  RETURN_IF_ERROR(FromGrpc(stub_->GetRollout(&context, request, &rollout), address_, plaintext_));
  return rollout;
}

StatusOr<std::vector<v1::Rollout>> RolloutClient::ListRollouts(const std::string& model_hash) {
  v1::ListRolloutsRequest request;
  request.set_model_hash(model_hash);
  return AllPages(address_, plaintext_, stub_.get(), &v1::RolloutService::Stub::ListRollouts,
                  request, &v1::ListRolloutsResponse::mutable_rollouts, kRolloutCallDeadline);
}

StatusOr<v1::Rollout> RolloutClient::PauseRollout(const std::string& rollout_id,
                                                  const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::PauseRolloutRequest request;
  request.set_rollout_id(rollout_id);
  request.set_reason(reason);
  v1::Rollout rollout;
  RETURN_IF_ERROR(FromGrpc(stub_->PauseRollout(&context, request, &rollout), address_, plaintext_));
  return rollout;
}

StatusOr<v1::Rollout> RolloutClient::ResumeRollout(const std::string& rollout_id) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::ResumeRolloutRequest request;
  request.set_rollout_id(rollout_id);
  v1::Rollout rollout;
  RETURN_IF_ERROR(
      FromGrpc(stub_->ResumeRollout(&context, request, &rollout), address_, plaintext_));
  return rollout;
}

StatusOr<v1::Rollout> RolloutClient::RollbackRollout(const std::string& rollout_id) {
  grpc::ClientContext context;
  SetDeadline(context, kRolloutCallDeadline);
  v1::RollbackRolloutRequest request;
  request.set_rollout_id(rollout_id);
  v1::Rollout rollout;
  RETURN_IF_ERROR(
      FromGrpc(stub_->RollbackRollout(&context, request, &rollout), address_, plaintext_));
  return rollout;
}

}  // namespace ripplekv::cli
