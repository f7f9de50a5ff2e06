#pragma once
// ripplekv.v1.AdminService (docs/API.md, "AdminService"): operations on the scheduler's own
// database and workers for the admin role (auth.cc's table). A thin adapter over store::Store and
// the scheduler core: it checks what the message alone can say and maps Status codes one to one.
//
// Thread-safety: handlers run on gRPC's callback threads and the work pool; the store is
// thread-safe.

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "ripplekv/v1/admin.grpc.pb.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/service/work_pool.h"
#include "store/store.h"

namespace ripplekv::scheduler::service {

struct AdminServiceOptions {
  store::Store* store = nullptr;  // the database checkpointed (not owned)
  Scheduler* scheduler = nullptr;  // whose quarantines are lifted (not owned)
  WorkPool* pool = nullptr;       // runs the handlers; null: gRPC's threads
  // The directories checkpoints may be written under (--checkpoint-dir), as
  // PrepareCheckpointRoots returns them (absolute, symlinks resolved); empty: CreateCheckpoint is
  // refused.
  std::vector<std::string> checkpoint_roots;
};

// The --checkpoint-dir directories made ready: each is created (0700) when missing and resolved
// with realpath. Errors: InvalidArgument (an empty or relative path, one that is not a directory),
// Internal (cannot create or resolve), each naming the directory.
[[nodiscard]] StatusOr<std::vector<std::string>> PrepareCheckpointRoots(
    const std::vector<std::string>& dirs);

// Where a checkpoint asked for as `requested` goes: `requested` itself when absolute, relative to
// the first root otherwise, with its parent resolved by realpath (so neither ".." nor a symlink
// leads out) and the result required to lie under one of `roots` (PrepareCheckpointRoots'
// output). Errors: FailedPrecondition (no roots: the scheduler runs without --checkpoint-dir),
// InvalidArgument (empty, not naming a new directory, a parent that does not exist, outside every
// root: the message names the roots), AlreadyExists (the target exists: a checkpoint makes a new
// directory).
[[nodiscard]] StatusOr<std::string> ResolveCheckpointDir(const std::vector<std::string>& roots,
                                                         const std::string& requested);

class AdminServiceImpl final : public ::ripplekv::v1::AdminService::CallbackService {
 public:
  explicit AdminServiceImpl(AdminServiceOptions options) : options_(options) {}

  grpc::ServerUnaryReactor* CreateCheckpoint(grpc::CallbackServerContext* context,
                                             const v1::CreateCheckpointRequest* request,
                                             v1::CreateCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* LiftQuarantine(grpc::CallbackServerContext* context,
                                           const v1::LiftQuarantineRequest* request,
                                           v1::LiftQuarantineResponse* response) override;

  // The handler's logic without a reactor: the checkpoint goes to ResolveCheckpointDir's path,
  // which the response names. Errors: InvalidArgument (`dir` over 4096 bytes), those of
  // ResolveCheckpointDir, then those of store::Store::Checkpoint.
  [[nodiscard]] Status DoCreateCheckpoint(const v1::CreateCheckpointRequest& request,
                                          v1::CreateCheckpointResponse* response);
  // Errors: InvalidArgument (`worker_id` empty), NotFound (not quarantined).
  [[nodiscard]] Status DoLiftQuarantine(const v1::LiftQuarantineRequest& request,
                                        v1::LiftQuarantineResponse* response);

 private:
  const AdminServiceOptions options_;
};

}  // namespace ripplekv::scheduler::service
