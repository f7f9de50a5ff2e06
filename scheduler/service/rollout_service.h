#pragma once
// ripplekv.v1.RolloutService (docs/ROLLOUTS.md, docs/API.md): frozen budget-map versions over the
// store and the scheduler's budget mapping, rollouts over rollout::RolloutEngine
// (scheduler/rollout/), and the serving nodes' WatchBudgets streams and reports. A thin adapter:
// it checks what the message alone can say, binds an agent's calls to the node id of its token
// (docs/SECURITY.md), converts messages (rollout_convert.h) and moves the bytes, and maps Status
// codes one to one.
//
// Thread-safety: handlers run on gRPC's callback threads and the work pool. Shutdown() must be
// called before the grpc::Server is shut down, so that WatchBudgets streams end (UNAVAILABLE).

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ripplekv/v1/rollout.grpc.pb.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/rollout/rollout_engine.h"
#include "scheduler/service/auth.h"
#include "scheduler/service/work_pool.h"
#include "store/store.h"

namespace ripplekv::scheduler::service {

struct RolloutServiceOptions {
  Scheduler* scheduler = nullptr;            // computes maps from profiles (not owned)
  store::Store* store = nullptr;             // frozen versions (not owned)
  rollout::RolloutEngine* engine = nullptr;  // rollouts and nodes (not owned)
  WorkPool* pool = nullptr;                  // runs the handlers; null: gRPC's threads
  const TokenTable* tokens = nullptr;        // null: no tokens, no node binding
  size_t max_streams = 100'000;              // WatchBudgets streams open at once
};

class RolloutServiceImpl final : public ::ripplekv::v1::RolloutService::CallbackService {
 public:
  explicit RolloutServiceImpl(RolloutServiceOptions options);
  ~RolloutServiceImpl() override;

  // Ends every WatchBudgets stream with UNAVAILABLE and refuses new ones. Idempotent.
  void Shutdown();
  size_t open_streams() const;

  grpc::ServerUnaryReactor* CreateBudgetMap(grpc::CallbackServerContext* context,
                                            const v1::CreateBudgetMapRequest* request,
                                            v1::CreateBudgetMapResponse* response) override;
  grpc::ServerUnaryReactor* GetBudgetMap(grpc::CallbackServerContext* context,
                                         const v1::GetBudgetMapVersionRequest* request,
                                         v1::BudgetMapVersion* response) override;
  grpc::ServerUnaryReactor* ListBudgetMaps(grpc::CallbackServerContext* context,
                                           const v1::ListBudgetMapVersionsRequest* request,
                                           v1::ListBudgetMapVersionsResponse* response) override;
  grpc::ServerUnaryReactor* CreateRollout(grpc::CallbackServerContext* context,
                                          const v1::CreateRolloutRequest* request,
                                          v1::Rollout* response) override;
  grpc::ServerUnaryReactor* GetRollout(grpc::CallbackServerContext* context,
                                       const v1::GetRolloutRequest* request,
                                       v1::Rollout* response) override;
  grpc::ServerUnaryReactor* ListRollouts(grpc::CallbackServerContext* context,
                                         const v1::ListRolloutsRequest* request,
                                         v1::ListRolloutsResponse* response) override;
  grpc::ServerUnaryReactor* PauseRollout(grpc::CallbackServerContext* context,
                                         const v1::PauseRolloutRequest* request,
                                         v1::Rollout* response) override;
  grpc::ServerUnaryReactor* ResumeRollout(grpc::CallbackServerContext* context,
                                          const v1::ResumeRolloutRequest* request,
                                          v1::Rollout* response) override;
  grpc::ServerUnaryReactor* RollbackRollout(grpc::CallbackServerContext* context,
                                            const v1::RollbackRolloutRequest* request,
                                            v1::Rollout* response) override;
  grpc::ServerWriteReactor<v1::BudgetAssignment>* WatchBudgets(
      grpc::CallbackServerContext* context, const v1::WatchBudgetsRequest* request) override;
  grpc::ServerUnaryReactor* ReportBudget(grpc::CallbackServerContext* context,
                                         const v1::ReportBudgetRequest* request,
                                         v1::ReportBudgetResponse* response) override;

  // The unary handlers' logic without reactors.
  [[nodiscard]] Status DoCreateBudgetMap(const v1::CreateBudgetMapRequest& request,
                                         v1::CreateBudgetMapResponse* response);
  [[nodiscard]] Status DoGetBudgetMap(const v1::GetBudgetMapVersionRequest& request,
                                      v1::BudgetMapVersion* response);
  [[nodiscard]] Status DoListBudgetMaps(const v1::ListBudgetMapVersionsRequest& request,
                                        v1::ListBudgetMapVersionsResponse* response);
  [[nodiscard]] Status DoListRollouts(const v1::ListRolloutsRequest& request,
                                      v1::ListRolloutsResponse* response);

  class NodeStream;  // one WatchBudgets stream (rollout_service.cc)

 private:
  // OK when the call may act for `node_id`: no token table, an admin, or an agent bound to it.
  [[nodiscard]] Status CheckNode(const grpc::CallbackServerContext& context,
                                 const std::string& node_id) const;
  void Ended(const NodeStream* stream);

  const RolloutServiceOptions options_;
  mutable std::mutex mu_;
  std::map<const NodeStream*, std::shared_ptr<NodeStream>> streams_;  // guarded by mu_
  bool shut_down_ = false;                                            // guarded by mu_
};

}  // namespace ripplekv::scheduler::service
