#pragma once
// ripplekv.v1.WorkerService over the scheduler core (docs/API.md, "WorkerService"): Register,
// GetJobData, and Connect, the worker's one bidirectional stream. A thin adapter: it converts
// messages (convert.h) and calls scheduler::Scheduler; the session registry (which stream is a
// worker's current one) is the only state it keeps.
//
// Connect: the first message must be `hello` naming the worker's current session
// (FAILED_PRECONDITION otherwise). On a heartbeat the stream calls Scheduler::Heartbeat, answers
// with a heartbeat_ack and, while the worker has capacity (Scheduler::NextTask), sends task
// assignments; it fills again after each task_done. Fencing: the stream's session
// (scheduler/core/worker_session.h) keeps the task ids it gave out and decides what a message
// about a task does; a message about any other task id (forged, another job's, a lease that
// expired) is rejected, counted (Stats) and logged escaped and truncated, and changes nothing.
// Trial results are checked as they arrive (docs/DESIGN.md §3.3) and kept until task_done, which
// stores them in one write (Scheduler::SubmitTaskResults). A refused or failed task returns to
// pending, or fails its job for the reasons the protocol says. The end of the stream (or a
// retired session's end) calls Scheduler::WorkerGone unless the worker registered again
// meanwhile. The stream itself decides nothing: it converts messages, moves bytes and carries
// out what the session and the scheduler decide.
//
// Thread-safety: all methods may be called from any thread. Shutdown() must be called before
// the grpc::Server is shut down: it ends every stream with UNAVAILABLE.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/core/scheduler.h"
#include "scheduler/service/work_pool.h"

namespace ripplekv::scheduler::service {

struct WorkerServiceOptions {
  int64_t heartbeat_interval_ms = 2'000;  // told to workers at Register, ms
  int64_t lease_timeout_ms = 30'000;      // told to workers: silent this long loses leases, ms
                                          // (the scheduler's heartbeat_timeout_ms)
  WorkPool* pool = nullptr;  // runs the handlers and stream messages; null: on gRPC's threads
};

// Counters of the worker service since it started, for tests and operators.
struct WorkerServiceStats {
  uint64_t rejected_messages = 0;  // about a task the stream does not hold (forged, stale)
  uint64_t invalid_results = 0;    // results that failed their attempt (range, KL, count)
};

class WorkerServiceImpl final : public ::ripplekv::v1::WorkerService::CallbackService {
 public:
  // `scheduler` is not owned and must outlive this service.
  WorkerServiceImpl(Scheduler* scheduler, WorkerServiceOptions options);
  ~WorkerServiceImpl() override;

  // Drains the core's outbox (Scheduler::TakeEvents) and sends each event, in order, down the
  // streams of the workers concerned (if connected): a Revocation as a task_cancellation of the
  // lease; a QuarantineNotice as `quarantined`, after which the stream ends (and a log line); an
  // EndedJob as a job-level task_cancellation to each worker of the job's model, so it drops the
  // job's data and prefills. Called after every worker message, tick, cancellation and written
  // completion.
  void DeliverEvents();

  // The scheduler's periodic work: Scheduler::ExpireLeases, logged, then DeliverEvents (its
  // revocations and the jobs it ended). Called by the server's timer.
  void Tick();

  WorkerServiceStats Stats() const;

  // Offers free tasks to every connected worker of `model_hash` (every worker when empty): leases
  // returned to pending by a departed worker or by expiry, or a store writable again, reach idle
  // workers at once.
  void RefillWorkers(const std::string& model_hash);

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
    std::string model_hash;            // the model the worker registered with
    ConnectReactor* stream = nullptr;  // the stream that said hello with this session, if any
  };

  // Binds `stream` to the worker's current session. FailedPrecondition: unknown worker or
  // session, superseded session, or a stream already bound.
  [[nodiscard]] Status Attach(const std::string& worker_id, const std::string& session_id,
                              ConnectReactor* stream);
  // The stream ended: unbinds it, and calls WorkerGone when it was the current session's.
  void Detach(ConnectReactor* stream);
  // On the scheduler's committer thread: a task_done's results were written (or not); logs the
  // outcome, sends the job-level cancellations of a job it finished, and offers a new round's
  // tasks of a job it extended to every stream (RefillWorkers). Uses no stream of its own (the
  // one that sent the task_done may be gone).
  void CompletionWritten(const std::string& worker_id, const std::string& task_id, store::JobId job,
                         const StatusOr<TaskResultsOutcome>& outcome);

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
  std::atomic<uint64_t> rejected_messages_{0};
  std::atomic<uint64_t> invalid_results_{0};
};

}  // namespace ripplekv::scheduler::service
