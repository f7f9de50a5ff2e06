#include "scheduler/service/admin_service.h"

#include "kernels/base/strings.h"
#include "scheduler/service/convert.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr size_t kMaxDirBytes = 4096;

}  // namespace

Status AdminServiceImpl::DoCreateCheckpoint(const v1::CreateCheckpointRequest& request,
                                            v1::CreateCheckpointResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "CreateCheckpoint"));
  if (request.dir().size() > kMaxDirBytes) {
    return absl::InvalidArgumentError(
        Cat("dir: ", request.dir().size(), " bytes, at most ", kMaxDirBytes));
  }
  ASSIGN_OR_RETURN(store::CheckpointInfo info, options_.store->Checkpoint(request.dir()));
  spdlog::info("checkpoint of the database written to {} ({} bytes)", info.dir, info.bytes);
  response->set_dir(info.dir);
  response->set_bytes(info.bytes);
  response->set_created_unix_ms(info.created_at_ms);
  response->set_schema_version(info.schema_version);
  return absl::OkStatus();
}

Status AdminServiceImpl::DoLiftQuarantine(const v1::LiftQuarantineRequest& request,
                                          v1::LiftQuarantineResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "LiftQuarantine"));
  if (request.worker_id().empty()) return absl::InvalidArgumentError("worker_id: is required");
  ASSIGN_OR_RETURN(std::string reason, options_.scheduler->LiftQuarantine(request.worker_id()));
  spdlog::warn("worker {}: quarantine lifted by an admin (it was: {})",
               EscapeForLog(request.worker_id()), reason);
  response->set_reason(std::move(reason));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* AdminServiceImpl::LiftQuarantine(
    grpc::CallbackServerContext* context, const v1::LiftQuarantineRequest* request,
    v1::LiftQuarantineResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoLiftQuarantine(*request, response); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateCheckpoint(
    grpc::CallbackServerContext* context, const v1::CreateCheckpointRequest* request,
    v1::CreateCheckpointResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoCreateCheckpoint(*request, response); });
}

}  // namespace ripplekv::scheduler::service
