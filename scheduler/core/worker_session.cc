#include "scheduler/core/worker_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "scheduler/core/result_manager.h"

namespace ripplekv::scheduler {

void WorkerSession::Assigned(const std::string& task_id, const Assignment& assignment) {
  leases_[task_id] = HeldTask{.lease = {.key = assignment.key, .attempt = assignment.attempts},
                              .trials = assignment.trials};
}

WorkerSession::HeldTask* WorkerSession::Held(const std::string& task_id) {
  auto it = leases_.find(task_id);
  return it == leases_.end() ? nullptr : &it->second;
}

std::optional<WorkerSession::HeldTask> WorkerSession::Take(const std::string& task_id) {
  auto it = leases_.find(task_id);
  if (it == leases_.end()) return std::nullopt;
  HeldTask task = std::move(it->second);
  leases_.erase(it);
  return task;
}

std::vector<LeaseId> WorkerSession::Listed(std::span<const std::string> task_ids) const {
  std::vector<LeaseId> listed;
  for (const std::string& task_id : task_ids) {
    if (auto it = leases_.find(task_id); it != leases_.end()) listed.push_back(it->second.lease);
  }
  return listed;
}

std::string WorkerSession::AddResult(const std::string& task_id, const IncomingResult& result) {
  HeldTask& held = leases_.at(task_id);
  const store::TaskKey& key = held.lease.key;
  std::string invalid;
  const store::TrialResult trial{key.job, static_cast<uint32_t>(result.sample),
                                 static_cast<uint32_t>(result.layer),
                                 static_cast<uint32_t>(result.trial), result.kl};
  if (result.task_id != task_id) {
    invalid =
        absl::StrCat("a result in its task_done names task \"", EscapeForLog(result.task_id), "\"");
  } else if (result.job_id != absl::StrCat(key.job) || result.sample < 0 || result.layer < 0 ||
             result.trial < 0) {
    invalid = absl::StrCat("trial_result names (job \"", EscapeForLog(result.job_id), "\", sample ",
                           result.sample, ", layer ", result.layer, ", trial ", result.trial,
                           "), not one of its task's trials");
  } else {
    invalid = InvalidTaskResult(
        key, held.trials, trial,
        std::any_of(held.results.begin(), held.results.end(),
                    [&](const store::TrialResult& r) { return r.trial == trial.trial; }));
  }
  if (invalid.empty()) {
    held.results.push_back(trial);
  } else {
    leases_.erase(task_id);
  }
  return invalid;
}

RefusalStep WorkerSession::StepFor(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kInvalidTask:
      return RefusalStep::kFailJob;
    // The job as a whole cannot run here; other jobs can. A job whose data no worker of its model
    // can read, or that no such worker has the memory for, fails rather than circling.
    case RefusalReason::kModelHashMismatch:
      return RefusalStep::kRefuseJob;
    case RefusalReason::kDataUnavailable:
    case RefusalReason::kInsufficientMemory:
      return RefusalStep::kRefuseJobOrFail;
    case RefusalReason::kDraining:
      return RefusalStep::kReleaseAndDrain;
    case RefusalReason::kUnspecified:
    case RefusalReason::kAtCapacity:
    case RefusalReason::kTransient:
      break;
  }
  return RefusalStep::kRelease;  // at capacity, transient, unspecified: offered again later
}

bool WorkerSession::ErrorFailsJob(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kFailedPrecondition || code == absl::StatusCode::kDataLoss;
}

std::optional<std::string> WorkerSession::Revoke(const LeaseId& lease) {
  auto it = std::find_if(leases_.begin(), leases_.end(),
                         [&](const auto& held) { return held.second.lease == lease; });
  if (it == leases_.end()) return std::nullopt;
  std::string task_id = it->first;
  leases_.erase(it);
  return task_id;
}

void WorkerSession::EndJob(store::JobId job) {
  std::erase_if(leases_, [&](const auto& held) { return held.second.lease.key.job == job; });
  described_.erase(job);
}

bool WorkerSession::Described(store::JobId job, const std::string& description) const {
  auto it = described_.find(job);
  return it != described_.end() && it->second == description;
}

void WorkerSession::Describe(store::JobId job, const std::string& description) {
  described_[job] = description;
}

}  // namespace ripplekv::scheduler
