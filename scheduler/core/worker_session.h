#pragma once
// One worker stream's session (docs/DESIGN.md §3.3, "Fencing and liveness"): the leases the
// stream gave its worker, by task id, with the results received for each so far, and the rules
// that decide what a message about a task does. The Connect reactor (scheduler/service/
// worker_service.cc) converts each message into a call here and carries out the answer (a
// scheduler call, a message to the worker, a counted rejection); it decides nothing itself.
//
//   - Fencing: a message about a task id this session does not hold (forged, another job's, an
//     expired or re-leased attempt) is rejected (Held returns null) and changes nothing.
//   - Results: each is checked against its lease as it arrives (AddResult, with the one rule
//     InvalidTaskResult) and kept until task_done takes the task (Take); an invalid one fails the
//     attempt and the session forgets the lease.
//   - Refusals: StepFor maps the worker's reason to what the scheduler does with the lease; a
//     task_done with an error fails the job or only the attempt (ErrorFailsJob).
//   - Job ends, revocations and quarantines drop the leases concerned (EndJob, Revoke, Clear).
//
// No I/O and no protobuf. Thread-safety: none; the reactor calls it under its stream's mutex.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/core/types.h"
#include "store/types.h"

namespace ripplekv::scheduler {

// A worker's reason for refusing a task (worker.proto, RefusalReason).
enum class RefusalReason {
  kUnspecified,  // treated as transient
  kModelHashMismatch,
  kAtCapacity,
  kDraining,
  kDataUnavailable,
  kInvalidTask,
  kInsufficientMemory,
  kTransient,
};

// What the scheduler does with a refused lease.
enum class RefusalStep {
  kFailJob,          // the task is invalid: its job fails (Scheduler::FailJobOfLease)
  kRefuseJob,        // the job cannot run on this worker (Scheduler::RefuseJob)
  kRefuseJobOrFail,  // as kRefuseJob, and the job fails once every worker refused it
  kRelease,          // offered again later (Scheduler::ReleaseTask)
  kReleaseAndDrain,  // as kRelease, and no more tasks go to this worker
};

// A trial result as a worker sent it (worker.proto, TrialResult), before any check.
struct IncomingResult {
  std::string task_id;
  std::string job_id;
  int64_t sample = 0;
  int64_t layer = 0;
  int64_t trial = 0;
  double kl = 0;
};

class WorkerSession {
 public:
  // A lease this session gave its worker, with the results received for it so far.
  struct HeldTask {
    LeaseId lease;
    uint32_t trials = 0;
    std::vector<store::TrialResult> results;  // checked; at most `trials`
  };

  // `task_id` of `assignment` went to the worker.
  void Assigned(const std::string& task_id, const Assignment& assignment);
  // The task held under `task_id`, or null: the message about it is rejected.
  HeldTask* Held(const std::string& task_id);
  // Takes the task held under `task_id` out of the session (done, refused or failed).
  std::optional<HeldTask> Take(const std::string& task_id);
  // The leases of `task_ids` (a heartbeat's list) that this session holds, in order.
  std::vector<LeaseId> Listed(std::span<const std::string> task_ids) const;

  // Checks `result` against the task held under `task_id` (which carried it: a trial_result of
  // its own or one inside that task's task_done): empty when it is one of the task's trials not
  // seen yet and passes InvalidTaskResult (it is kept); otherwise why not, and the session no
  // longer holds the task (the attempt fails).
  std::string AddResult(const std::string& task_id, const IncomingResult& result);

  static RefusalStep StepFor(RefusalReason reason);
  // Whether a task_done with error `code` fails the task's job (InvalidArgument,
  // FailedPrecondition, DataLoss: worker.proto, TaskDone.error); otherwise only the attempt fails
  // and the task goes back to pending.
  static bool ErrorFailsJob(absl::StatusCode code);

  // Forgets the lease `lease`; returns the task id it was held under, if it was.
  std::optional<std::string> Revoke(const LeaseId& lease);
  // Job `job` ended: forgets its leases and its data description.
  void EndJob(store::JobId job);
  // The worker was quarantined: forgets every lease.
  void Clear() { leases_.clear(); }

  // Whether this session passed `description` of `job` on to the scheduler last; Describe
  // records that it did.
  bool Described(store::JobId job, const std::string& description) const;
  void Describe(store::JobId job, const std::string& description);

  // The worker said it drains (or refused a task for it): no more tasks go to it.
  bool draining() const { return draining_; }
  void Drain() { draining_ = true; }

 private:
  std::map<std::string, HeldTask> leases_;  // by task id
  // By job, the data description this session's worker reported last.
  std::map<store::JobId, std::string> described_;
  bool draining_ = false;
};

}  // namespace ripplekv::scheduler
