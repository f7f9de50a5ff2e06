#pragma once
// Jobs and rounds (docs/DESIGN.md §3, docs/SCHEDULER.md "Rounds"): the table of active jobs
// (priority, then age), an index of each active job's pending tasks (loaded from the store on
// first use and kept in step with every transition, so a dispatch costs O(log tasks)), the
// per-job limits checked at submission, the extension of an until_stable job by its next round,
// the pending-job expiry, the jobs left complete without a profile, and each job's observed
// completion rate and data description.
//
// The manager reads and writes the store for its own records (the job list, a job's tasks, its
// creation, extension and data description); the Scheduler façade decides when a job ends and
// tells this manager to forget it.
//
// Thread-safety: none of its own; every method requires the Scheduler's mutex.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/profile.h"
#include "scheduler/core/types.h"
#include "scheduler/core/worker_manager.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

class JobManager {
 public:
  // `store` is not owned and must outlive this object.
  JobManager(store::Store* store, const SchedulerOptions& options);

  // The store's active jobs, priority then age, read again after Reload (only the Scheduler
  // changes which jobs are active). NextTask marks a job it leases from as running here.
  [[nodiscard]] StatusOr<std::vector<store::Job>*> Active();
  // The active job `id`, or null when it is not active (or the store cannot be read).
  const store::Job* ActiveJob(store::JobId id);
  // A job was created, ended or changed its counters: the next Active() reads the store.
  void Reload() { active_.reset(); }
  // After the store was reopened: forgets the active jobs and every pending index.
  void ForgetReads();

  // The pending tasks of `job`, loaded from the store on first use.
  [[nodiscard]] StatusOr<PendingSet*> Pending(store::JobId job);
  // The pending tasks of `job` when its index is loaded; null otherwise.
  const PendingSet* LoadedPending(store::JobId job) const;
  // A lease of `key` went back to pending in the store.
  void MarkPending(const store::TaskKey& key);
  // `key` is no longer pending (leased, or its completion written).
  void Unpend(const store::TaskKey& key);

  // The per-job limits of SubmitJob for a valid `spec` of a model of `n_layers` layers:
  // InvalidArgument past max_tasks_per_job, ResourceExhausted past max_trials_per_job or when its
  // inline data would take the pending jobs' past max_pending_inline_bytes.
  [[nodiscard]] Status CheckLimits(const store::JobSpec& spec, int64_t n_layers);
  // Plans a valid `spec` and creates the job in one store write (Store::CreateJob).
  [[nodiscard]] StatusOr<store::CreateJobOutcome> Create(const store::JobSpec& spec,
                                                         int64_t n_layers);
  // Extends a complete until_stable `job` by its next round to `samples_planned` samples (one
  // store write) and indexes the new tasks as pending; returns the samples planned.
  [[nodiscard]] StatusOr<uint32_t> BeginRound(const store::Job& job, int64_t n_layers,
                                              uint32_t samples_planned);
  // The active jobs still pending pending_job_ttl_ms after their submission at `now`.
  [[nodiscard]] StatusOr<std::vector<store::Job>> ExpiredPending(int64_t now);
  // The lease's task deadline at `now` for a job of `spec` on `model`.
  int64_t TaskDeadline(const store::JobSpec& spec, const method::ProfileModel& model,
                       int64_t now) const;

  // Jobs whose tasks may all be done without a profile: every active job until the first call
  // has looked (a crash may have left some), then those marked.
  [[nodiscard]] StatusOr<std::vector<store::JobId>> Unprofiled();
  void MarkUnprofiled(store::JobId id) { unprofiled_.insert(id); }
  void MarkProfiled(store::JobId id) { unprofiled_.erase(id); }

  // How long job `id` has been stalled by faults at `now` (since the first call without a
  // NotStalled between), ms.
  int64_t StalledFor(store::JobId id, int64_t now);
  void NotStalled(store::JobId id) { stalled_since_.erase(id); }

  // A completion of `job` was observed at `now` (the rate Progress reports).
  void ObserveProgress(const store::Job& job, int64_t now);
  // Fills progress.tasks_per_second and eta_ms from the observed rate.
  void FillRate(JobProgress& progress) const;

  // DescribeJobData (scheduler.h): whether `description` is the one kept for job `id`.
  [[nodiscard]] StatusOr<bool> DescribeData(store::JobId id, const std::string& description);

  // Forgets everything kept for job `id` (it ended or was profiled).
  void Forget(store::JobId id);

 private:
  struct RateObservation {
    int64_t first_ms = 0;
    uint64_t first_done = 0;
    int64_t last_ms = 0;
    uint64_t last_done = 0;
  };

  // The inline data bytes that pending jobs hold, from the active jobs.
  [[nodiscard]] StatusOr<uint64_t> PendingInlineBytes();

  store::Store* const store_;
  const SchedulerOptions options_;
  std::optional<std::vector<store::Job>> active_;
  std::map<store::JobId, PendingSet> pending_;  // loaded jobs only; dropped when a job ends
  std::map<store::JobId, RateObservation> rates_;
  std::map<store::JobId, std::string> data_descriptions_;  // as stored; dropped when a job ends
  bool checked_unprofiled_ = false;
  std::set<store::JobId> unprofiled_;
  std::map<store::JobId, int64_t> stalled_since_;  // jobs waiting on faults, since when
};

// The task deadline the scheduler derives when SchedulerOptions::task_deadline_ms is 0: 5 minutes
// plus the task's forward-pass work (the sample's context and every trial's probe through the
// model, 24 d_model^2 FLOPs per token per layer) at a pessimistic 1e10 FLOP/s.
int64_t DeriveTaskDeadlineMs(const method::CalibrationParams& params, const method::ProfileModel& model);

// The profile's data_domain for a job (method/calibration_sets.h): "user" for inline data (also
// when the record was read without it: data_inline_bytes) or a path, else the built-in set's
// domain (the default set's when none is named).
std::string_view DataDomainOf(const store::Job& job);

// The profile's data_source line for a spec when no worker described the data: "inline data, N
// bytes", "file PATH" or "built-in calibration text".
std::string DescribeDataSource(const store::Job& job);

}  // namespace ripplekv::scheduler
