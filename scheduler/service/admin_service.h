#pragma once
// ripplekv.v1.AdminService (docs/API.md, "AdminService"): operations on the scheduler's own
// database and workers for the admin role (auth.cc's table). A thin adapter over store::Store and
// the scheduler core: it checks what the message alone can say and maps Status codes one to one.
//
// Thread-safety: handlers run on gRPC's callback threads and the work pool; the store is
// thread-safe.

#include <grpcpp/grpcpp.h>

#include "kernels/base/status.h"
#include "ripplekv/v1/admin.grpc.pb.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/service/work_pool.h"
#include "store/store.h"

namespace ripplekv::scheduler::service {

struct AdminServiceOptions {
  store::Store* store = nullptr;  // the database checkpointed (not owned)
  Scheduler* scheduler = nullptr;  // whose quarantines are lifted (not owned)
  WorkPool* pool = nullptr;       // runs the handlers; null: gRPC's threads
};

class AdminServiceImpl final : public ::ripplekv::v1::AdminService::CallbackService {
 public:
  explicit AdminServiceImpl(AdminServiceOptions options) : options_(options) {}

  grpc::ServerUnaryReactor* CreateCheckpoint(grpc::CallbackServerContext* context,
                                             const v1::CreateCheckpointRequest* request,
                                             v1::CreateCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* LiftQuarantine(grpc::CallbackServerContext* context,
                                           const v1::LiftQuarantineRequest* request,
                                           v1::LiftQuarantineResponse* response) override;

  // The handler's logic without a reactor. Errors: InvalidArgument (`dir` over 4096 bytes), then
  // those of store::Store::Checkpoint.
  [[nodiscard]] Status DoCreateCheckpoint(const v1::CreateCheckpointRequest& request,
                                          v1::CreateCheckpointResponse* response);
  // Errors: InvalidArgument (`worker_id` empty), NotFound (not quarantined).
  [[nodiscard]] Status DoLiftQuarantine(const v1::LiftQuarantineRequest& request,
                                        v1::LiftQuarantineResponse* response);

 private:
  const AdminServiceOptions options_;
};

}  // namespace ripplekv::scheduler::service
