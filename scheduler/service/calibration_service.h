#pragma once
// ripplekv.v1.CalibrationService over the scheduler core (docs/API.md): a thin adapter that
// converts messages (convert.h), calls scheduler::Scheduler (which owns every domain rule:
// idempotency, filtering, paging, parsing profiles, budget maps) and maps Status codes one to
// one. WatchJob streams are served by JobWatchers (job_watchers.h): event-driven and bounded.
//
// Thread-safety: handlers run on gRPC's callback threads; the Scheduler is thread-safe. Shutdown()
// must be called before the grpc::Server is shut down, so that watch streams end (UNAVAILABLE)
// instead of holding the server open.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <vector>

#include "ripplekv/v1/calibration.grpc.pb.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/service/job_watchers.h"
#include "scheduler/service/work_pool.h"

namespace ripplekv::scheduler::service {

struct CalibrationServiceOptions {
  JobWatchersOptions watch;  // WatchJob streams (job_watchers.h)
  WorkPool* pool = nullptr;  // runs the unary handlers; null: on gRPC's threads (not owned)
  // Called after a successful CancelJob, whose revocations and ended job wait in the core's
  // outbox (the worker service delivers them: WorkerServiceImpl::DeliverEvents). May be empty.
  std::function<void()> on_cancelled;
};

class CalibrationServiceImpl final : public ::ripplekv::v1::CalibrationService::CallbackService {
 public:
  // `scheduler` is not owned and must outlive this service.
  CalibrationServiceImpl(Scheduler* scheduler, CalibrationServiceOptions options);
  ~CalibrationServiceImpl() override;

  size_t open_watchers() const { return watchers_.open_streams(); }

  // Ends every watch stream with UNAVAILABLE and refuses new ones. Idempotent; waits (bounded)
  // for the streams to finish.
  void Shutdown();

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* ListJobTasks(grpc::CallbackServerContext* context,
                                         const v1::ListJobTasksRequest* request,
                                         v1::ListJobTasksResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* GetProfile(grpc::CallbackServerContext* context,
                                       const v1::GetProfileRequest* request,
                                       v1::Profile* response) override;
  grpc::ServerUnaryReactor* ListProfiles(grpc::CallbackServerContext* context,
                                         const v1::ListProfilesRequest* request,
                                         v1::ListProfilesResponse* response) override;
  grpc::ServerUnaryReactor* GetBudgetMap(grpc::CallbackServerContext* context,
                                         const v1::GetBudgetMapRequest* request,
                                         v1::BudgetMap* response) override;

  // The handlers' logic without gRPC reactors (each returns what the RPC answers).
  [[nodiscard]] Status DoSubmitJob(const v1::SubmitJobRequest& request,
                                   v1::SubmitJobResponse* response);
  [[nodiscard]] Status DoGetJob(const v1::GetJobRequest& request, v1::Job* response);
  [[nodiscard]] Status DoListJobs(const v1::ListJobsRequest& request,
                                  v1::ListJobsResponse* response);
  [[nodiscard]] Status DoListJobTasks(const v1::ListJobTasksRequest& request,
                                      v1::ListJobTasksResponse* response);
  [[nodiscard]] Status DoListWorkers(const v1::ListWorkersRequest& request,
                                     v1::ListWorkersResponse* response);
  [[nodiscard]] Status DoCancelJob(const v1::CancelJobRequest& request, v1::Job* response);
  [[nodiscard]] Status DoGetProfile(const v1::GetProfileRequest& request, v1::Profile* response);
  [[nodiscard]] Status DoListProfiles(const v1::ListProfilesRequest& request,
                                      v1::ListProfilesResponse* response);
  [[nodiscard]] Status DoGetBudgetMap(const v1::GetBudgetMapRequest& request,
                                      v1::BudgetMap* response);

 private:
  Scheduler* const scheduler_;
  const CalibrationServiceOptions options_;
  JobWatchers watchers_;
};

}  // namespace ripplekv::scheduler::service
