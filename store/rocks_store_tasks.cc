// RocksStore: leases and trial results (see store/store.h for the contracts).

#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "base/strings.h"
#include "store/codec.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

constexpr size_t kMaxWorkerIdBytes = 256;
// Missing trials named in a CompleteTask error before "and N more".
constexpr size_t kMaxNamedTrials = 8;

std::string TaskName(const TaskKey& key) {
  return Cat("task job=", key.job, " sample=", key.sample, " layer=", key.layer);
}

Status CheckWorkerId(const std::string& worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id is empty");
  if (worker_id.size() > kMaxWorkerIdBytes) {
    return absl::InvalidArgumentError(
        Cat("worker_id is ", worker_id.size(), " bytes; at most ", kMaxWorkerIdBytes));
  }
  return CheckUtf8(worker_id, "worker_id");
}

Status CheckRunning(const Job& job) {
  if (job.state == JobState::kRunning) return absl::OkStatus();
  return absl::FailedPreconditionError(Cat("job ", job.id, " is ", JobStateName(job.state),
                                           "; results are accepted only while it runs"));
}

Status CheckResult(const Job& job, const TrialResult& r) {
  if (r.trial >= job.spec.params.trials) {
    return absl::InvalidArgumentError(
        Cat("result job=", r.job, " sample=", r.sample, " layer=", r.layer, ": trial ", r.trial,
            " is not below the job's ", job.spec.params.trials, " trials"));
  }
  if (!std::isfinite(r.kl)) {
    return absl::InvalidArgumentError(Cat("result job=", r.job, " sample=", r.sample, " layer=",
                                          r.layer, " trial=", r.trial, ": kl is not finite"));
  }
  return absl::OkStatus();
}

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// Counts `kl` as a duplicate of `stored`.
void CountDuplicate(double stored, double kl, ResultWriteOutcome* outcome) {
  ++outcome->duplicates;
  if (!SameBits(stored, kl)) ++outcome->conflicts;
}

void AddCounts(const ResultWriteOutcome& outcome, Job* job) {
  job->results_stored += outcome.stored;
  job->duplicate_results += outcome.duplicates;
  job->conflicting_results += outcome.conflicts;
}

}  // namespace

// ---- Leases ----

StatusOr<Task> RocksStore::GetTask(const TaskKey& key) const {
  StatusOr<Task> task = ReadTask(key);
  if (absl::IsNotFound(task.status())) {
    // A purged job's tasks are gone: say so rather than "not found".
    if (Status job = ReadUnpurgedJob(key.job).status(); absl::IsFailedPrecondition(job)) {
      return job;
    }
  }
  return task;
}

StatusOr<std::vector<Task>> RocksStore::ListTasks(JobId job) const {
  RETURN_IF_ERROR(ReadUnpurgedJob(job).status());
  return ScanTasks(job);
}

StatusOr<Task> RocksStore::LeaseTask(const TaskKey& key, const std::string& worker_id,
                                     TimeMs deadline_ms) {
  RETURN_IF_ERROR(CheckWorkerId(worker_id));
  if (deadline_ms <= 0) return absl::InvalidArgumentError("lease deadline_ms must be > 0");
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(key.job));
  if (IsTerminal(job.state)) {
    return absl::FailedPreconditionError(
        Cat("job ", job.id, " is ", JobStateName(job.state), "; its tasks cannot be leased"));
  }
  ASSIGN_OR_RETURN(Task task, ReadTask(key));
  if (task.state == TaskState::kLeased) {
    return absl::FailedPreconditionError(Cat(TaskName(key), " is leased by worker '",
                                             task.lease_owner, "' until ", task.lease_deadline_ms));
  }
  if (task.state == TaskState::kDone) {
    return absl::FailedPreconditionError(Cat(TaskName(key), " is done"));
  }
  task.state = TaskState::kLeased;
  task.lease_owner = worker_id;
  task.lease_deadline_ms = deadline_ms;
  ++task.attempts;

  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutTask(&batch, task));
  if (job.state == JobState::kPending) {
    job.state = JobState::kRunning;
    job.updated_at_ms = Now();
    RETURN_IF_ERROR(PutJob(&batch, job));
  }
  RETURN_IF_ERROR(WriteLeases(&batch));
  return task;
}

StatusOr<Task> RocksStore::ExtendLease(const TaskKey& key, const std::string& worker_id,
                                       TimeMs deadline_ms) {
  if (deadline_ms <= 0) return absl::InvalidArgumentError("lease deadline_ms must be > 0");
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Task task, ReadTask(key));
  if (task.state != TaskState::kLeased || task.lease_owner != worker_id) {
    return absl::FailedPreconditionError(
        Cat(TaskName(key), " is not leased by worker '", worker_id, "' (it is ",
            TaskStateName(task.state), task.lease_owner.empty() ? "" : " by '", task.lease_owner,
            task.lease_owner.empty() ? "" : "'", ")"));
  }
  task.lease_deadline_ms = deadline_ms;
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutTask(&batch, task));
  RETURN_IF_ERROR(WriteLeases(&batch));
  return task;
}

StatusOr<Task> RocksStore::ReleaseLease(const TaskKey& key, const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Task task, ReadTask(key));
  if (task.state != TaskState::kLeased || task.lease_owner != worker_id) {
    return absl::FailedPreconditionError(Cat(TaskName(key), " is not leased by worker '", worker_id,
                                             "' (it is ", TaskStateName(task.state), ")"));
  }
  ClearLease(&task);
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutTask(&batch, task));
  RETURN_IF_ERROR(WriteLeases(&batch));
  return task;
}

StatusOr<std::vector<TaskKey>> RocksStore::ReleaseExpiredLeases(TimeMs now_ms) {
  std::lock_guard<std::mutex> lock(write_mu_);
  rocksdb::WriteBatch batch;
  ASSIGN_OR_RETURN(std::vector<TaskKey> released,
                   ReleaseLeasesWhere(&batch, [now_ms](const Task& task) {
                     return task.lease_deadline_ms <= now_ms;
                   }));
  if (batch.Count() > 0) RETURN_IF_ERROR(WriteLeases(&batch));
  return released;
}

StatusOr<std::vector<TaskKey>> RocksStore::ReopenTasks(JobId job_id,
                                                      std::span<const TaskKey> keys) {
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(job_id));
  RETURN_IF_ERROR(CheckRunning(job));
  std::set<TaskKey> unique;
  for (const TaskKey& key : keys) {
    if (key.job != job_id) {
      return absl::InvalidArgumentError(Cat(TaskName(key), " is not of job ", job_id));
    }
    unique.insert(key);
  }
  std::vector<TaskKey> reopened;
  rocksdb::WriteBatch batch;
  for (const TaskKey& key : unique) {
    ASSIGN_OR_RETURN(Task task, ReadTask(key));
    if (task.state != TaskState::kDone) continue;
    ASSIGN_OR_RETURN(std::vector<TrialResult> results, ScanResults(TaskKeyBytes(key)));
    for (const TrialResult& r : results) {
      RETURN_IF_ERROR(Delete(&batch, kResults, ResultKeyBytes(r)));
    }
    task.state = TaskState::kPending;
    task.completed_by.clear();
    task.completed_by_version.clear();
    RETURN_IF_ERROR(PutTask(&batch, task));
    --job.tasks_done;
    job.results_stored -= std::min<uint64_t>(job.results_stored, results.size());
    reopened.push_back(key);
  }
  if (reopened.empty()) return reopened;
  job.updated_at_ms = Now();
  RETURN_IF_ERROR(PutJob(&batch, job));
  RETURN_IF_ERROR(Write(&batch));
  return reopened;
}

// ---- Results ----

StatusOr<ResultWriteOutcome> RocksStore::PutResults(std::span<const TrialResult> results) {
  if (results.empty()) return ResultWriteOutcome{};
  const JobId job_id = results.front().job;
  for (const TrialResult& r : results) {
    if (r.job != job_id) {
      return absl::InvalidArgumentError(
          Cat("results of jobs ", job_id, " and ", r.job, " in one PutResults call"));
    }
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(job_id));
  RETURN_IF_ERROR(CheckRunning(job));

  std::set<std::pair<uint32_t, uint32_t>> known_tasks;
  std::map<std::string, double> written;  // by this call: key -> kl
  ResultWriteOutcome outcome;
  rocksdb::WriteBatch batch;
  for (const TrialResult& r : results) {
    RETURN_IF_ERROR(CheckResult(job, r));
    if (known_tasks.emplace(r.sample, r.layer).second) {
      RETURN_IF_ERROR(ReadTask({.job = r.job, .sample = r.sample, .layer = r.layer}).status());
    }
    std::string key = ResultKeyBytes(r);
    if (auto it = written.find(key); it != written.end()) {
      CountDuplicate(it->second, r.kl, &outcome);
      continue;
    }
    ASSIGN_OR_RETURN(std::optional<std::string> stored, Get(kResults, key));
    if (stored) {
      StatusOr<double> kl = DecodeResultValue(*stored);
      if (!kl.ok()) return Damaged(kResults, key, kl.status());
      CountDuplicate(*kl, r.kl, &outcome);
      continue;
    }
    RETURN_IF_ERROR(PutRaw(&batch, kResults, key, EncodeResultValue(r.kl)));
    written.emplace(std::move(key), r.kl);
    ++outcome.stored;
  }
  AddCounts(outcome, &job);
  job.updated_at_ms = Now();
  RETURN_IF_ERROR(PutJob(&batch, job));
  RETURN_IF_ERROR(Write(&batch));
  return outcome;
}

StatusOr<ResultWriteOutcome> RocksStore::CompleteTask(const TaskKey& key,
                                                      std::span<const TrialResult> results) {
  const Completion completion{.key = key, .results = results};
  return std::move(CompleteTasks({&completion, 1}).front());
}

std::vector<StatusOr<ResultWriteOutcome>> RocksStore::CompleteTasks(
    std::span<const Completion> completions) {
  std::vector<StatusOr<ResultWriteOutcome>> outcomes;
  outcomes.reserve(completions.size());
  std::unique_lock<std::mutex> lock(write_mu_);
  std::map<JobId, Job> jobs;  // read once, counters updated by every completion of the call
  std::map<TaskKey, std::map<uint32_t, double>> completed;  // by this call: task -> trial -> kl
  rocksdb::WriteBatch batch;
  // Checks one completion, then adds its records to `batch` (nothing when it fails).
  auto prepare = [&](const Completion& c) -> StatusOr<ResultWriteOutcome> {
    const TaskKey& key = c.key;
    for (const TrialResult& r : c.results) {
      if (r.job != key.job || r.sample != key.sample || r.layer != key.layer) {
        return absl::InvalidArgumentError(Cat("result job=", r.job, " sample=", r.sample,
                                              " layer=", r.layer, " trial=", r.trial, " is not of ",
                                              TaskName(key)));
      }
    }
    auto job_it = jobs.find(key.job);
    if (job_it == jobs.end()) {
      ASSIGN_OR_RETURN(Job read, ReadJob(key.job));
      job_it = jobs.emplace(key.job, std::move(read)).first;
    }
    Job& job = job_it->second;
    RETURN_IF_ERROR(CheckRunning(job));
    ASSIGN_OR_RETURN(Task task, ReadTask(key));
    for (const TrialResult& r : c.results) RETURN_IF_ERROR(CheckResult(job, r));

    // The task's results (trial -> kl): stored ones, or this call's when it completed the task.
    std::map<uint32_t, double> present;
    if (auto done = completed.find(key); done != completed.end()) {
      present = done->second;
      task.state = TaskState::kDone;
    } else {
      ASSIGN_OR_RETURN(std::vector<TrialResult> stored, ScanResults(TaskKeyBytes(key)));
      for (const TrialResult& r : stored) present.emplace(r.trial, r.kl);
    }
    ResultWriteOutcome outcome;
    std::vector<const TrialResult*> fresh;
    for (const TrialResult& r : c.results) {
      if (auto it = present.find(r.trial); it != present.end()) {
        CountDuplicate(it->second, r.kl, &outcome);
        continue;
      }
      present.emplace(r.trial, r.kl);
      fresh.push_back(&r);
      ++outcome.stored;
    }
    if (task.state != TaskState::kDone) {
      std::vector<uint32_t> missing;
      for (uint32_t t = 0; t < job.spec.params.trials; ++t) {
        if (!present.contains(t)) missing.push_back(t);
      }
      if (!missing.empty()) {
        std::string named;
        for (size_t i = 0; i < missing.size() && i < kMaxNamedTrials; ++i) {
          named += Cat(i == 0 ? "" : ", ", missing[i]);
        }
        if (missing.size() > kMaxNamedTrials) {
          named += Cat(" and ", missing.size() - kMaxNamedTrials, " more");
        }
        return absl::FailedPreconditionError(
            Cat(TaskName(key), " cannot complete: no result for trial ", named));
      }
    }
    // Checked: from here on the completion is written.
    for (const TrialResult* r : fresh) {
      RETURN_IF_ERROR(PutRaw(&batch, kResults, ResultKeyBytes(*r), EncodeResultValue(r->kl)));
    }
    if (task.state != TaskState::kDone) {
      ClearLease(&task);
      task.state = TaskState::kDone;
      task.completed_by = c.worker_id;
      task.completed_by_version = c.worker_version;
      RETURN_IF_ERROR(PutTask(&batch, task));
      ++job.tasks_done;
      outcome.task_completed = true;
      completed[key] = std::move(present);
    }
    AddCounts(outcome, &job);
    return outcome;
  };
  std::set<JobId> touched;
  for (const Completion& c : completions) {
    outcomes.push_back(prepare(c));
    if (outcomes.back().ok() && (outcomes.back()->stored > 0 || outcomes.back()->duplicates > 0 ||
                                 outcomes.back()->task_completed)) {
      touched.insert(c.key.job);
    }
  }
  if (touched.empty()) return outcomes;  // nothing to record
  Status written = absl::OkStatus();
  for (JobId id : touched) {
    Job& job = jobs.at(id);
    job.updated_at_ms = Now();
    if (written.ok()) written = PutJob(&batch, job);
  }
  // The fsync waits without write_mu_: leases taken meanwhile need not wait for it.
  if (written.ok()) written = WriteUnsynced(&batch);
  lock.unlock();
  if (written.ok()) written = SyncLog();
  if (!written.ok()) {
    for (StatusOr<ResultWriteOutcome>& outcome : outcomes) {
      if (outcome.ok()) outcome = written;
    }
  }
  return outcomes;
}

StatusOr<std::vector<TrialResult>> RocksStore::ScanResults(std::string_view prefix) const {
  std::vector<TrialResult> out;
  RETURN_IF_ERROR(Scan(kResults, prefix, [&](std::string_view key, std::string_view value) {
    std::optional<TrialResult> r = ParseResultKey(key);
    if (!r) return Damaged(kResults, key, absl::DataLossError("malformed key"));
    StatusOr<double> kl = DecodeResultValue(value);
    if (!kl.ok()) return Damaged(kResults, key, kl.status());
    r->kl = *kl;
    out.push_back(*r);
    return absl::OkStatus();
  }));
  return out;
}

StatusOr<std::vector<TrialResult>> RocksStore::ListResults(JobId job) const {
  RETURN_IF_ERROR(ReadUnpurgedJob(job).status());
  return ScanResults(JobKey(job));
}

StatusOr<std::vector<TrialResult>> RocksStore::ListTaskResults(const TaskKey& key) const {
  RETURN_IF_ERROR(GetTask(key).status());
  return ScanResults(TaskKeyBytes(key));
}

StatusOr<uint64_t> RocksStore::CountResults(JobId job) const {
  RETURN_IF_ERROR(ReadUnpurgedJob(job).status());
  uint64_t count = 0;
  RETURN_IF_ERROR(Scan(
      kResults, JobKey(job),
      [&](std::string_view, std::string_view) {
        ++count;
        return absl::OkStatus();
      },
      /*values=*/false));
  return count;
}

}  // namespace ripplekv::store
