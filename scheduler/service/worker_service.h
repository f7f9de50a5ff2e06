#pragma once
// ripplekv.v1.WorkerService over the scheduler core (docs/API.md, "WorkerService"): Register,
// GetJobData, and Connect, the worker's one bidirectional stream. A thin adapter: it converts
// messages (convert.h) and calls scheduler::Scheduler; the session registry (which stream is a
// worker's current one) is the only state it keeps.
//
// Connect: the first message must be `hello` naming the worker's current session
// (FAILED_PRECONDITION otherwise). On a heartbeat the stream calls Scheduler::Heartbeat, answers
// with a heartbeat_ack and, while the worker has capacity (Scheduler::NextTask), sends task
// assignments; it fills again after each task_done. Trial results go to Scheduler::TaskResults as
// they arrive, task_done completes the task. A refused or failed task returns to pending, or
// fails its job for the reasons the protocol says. The end of the stream (or a retired session's
// end) calls Scheduler::WorkerGone unless the worker registered again meanwhile.
//
// Thread-safety: all methods may be called from any thread. Shutdown() must be called before
// the grpc::Server is shut down: it ends every stream with UNAVAILABLE.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/core/scheduler.h"

namespace ripplekv::scheduler::service {

struct WorkerServiceOptions {
  int64_t heartbeat_interval_ms = 2'000;  // told to workers at Register, ms
  int64_t lease_timeout_ms = 30'000;      // told to workers: silent this long loses leases, ms
                                          // (the scheduler's heartbeat_timeout_ms)
};

class WorkerServiceImpl final : public ::ripplekv::v1::WorkerService::CallbackService {
 public:
  // `scheduler` is not owned and must outlive this service.
  WorkerServiceImpl(Scheduler* scheduler, WorkerServiceOptions options);
  ~WorkerServiceImpl() override;

  // Sends a task_cancellation for each revoked lease to its worker's stream (if connected).
  void Revoke(const std::vector<Revocation>& revocations);

  // Ends every stream with UNAVAILABLE and refuses new ones; waits (bounded) for them to end.
  void Shutdown();

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const ::ripplekv::v1::RegisterRequest* request,
                                     ::ripplekv::v1::RegisterResponse* response) override;
  grpc::ServerBidiReactor<::ripplekv::v1::WorkerMessage, ::ripplekv::v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetJobData(grpc::CallbackServerContext* context,
                                       const ::ripplekv::v1::GetJobDataRequest* request,
                                       ::ripplekv::v1::GetJobDataResponse* response) override;

  [[nodiscard]] Status DoRegister(const ::ripplekv::v1::RegisterRequest& request,
                                  ::ripplekv::v1::RegisterResponse* response);
  [[nodiscard]] Status DoGetJobData(const ::ripplekv::v1::GetJobDataRequest& request,
                                    ::ripplekv::v1::GetJobDataResponse* response);

 private:
  class ConnectReactor;
  struct Session {
    std::string session_id;
    ConnectReactor* stream = nullptr;  // the stream that said hello with this session, if any
  };

  // Binds `stream` to the worker's current session. FailedPrecondition: unknown worker or
  // session, superseded session, or a stream already bound.
  [[nodiscard]] Status Attach(const std::string& worker_id, const std::string& session_id,
                              ConnectReactor* stream);
  // The stream ended: unbinds it, and calls WorkerGone when it was the current session's.
  void Detach(ConnectReactor* stream);

  Scheduler* const scheduler_;
  const WorkerServiceOptions options_;

  // Recursive: a stream's OnDone (which locks it) may in principle run inline from a Finish
  // called while it is held.
  std::recursive_mutex mu_;
  std::condition_variable_any streams_cv_;
  std::map<std::string, Session> sessions_;  // by worker id; guarded by mu_
  std::set<ConnectReactor*> streams_;        // every open stream; guarded by mu_
  uint64_t next_session_ = 1;                // guarded by mu_
  bool shutting_down_ = false;               // guarded by mu_
};

}  // namespace ripplekv::scheduler::service
