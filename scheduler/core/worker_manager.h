#pragma once
// Workers and leases (docs/DESIGN.md §3, docs/SCHEDULER.md "Faulty workers"): the registry of
// registered workers with the leases each holds (the memory mirror of every lease in the store),
// their prefill affinity, the health record of each worker id (failures charged, quarantine),
// each task's failed attempts, and the workers dropped for a differing model summary. Chooses the
// task a worker is leased next (Choose) under the exclusion and verification rules.
//
// The manager decides and records; the Scheduler façade does the store writes and the
// cross-domain steps (a released lease back into the job's pending index, a job failed at
// max_attempts, a quarantine's events) around it.
//
// Thread-safety: none of its own; every method requires the Scheduler's mutex.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/core/types.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

class ResultManager;

// A lease as the store holds it: the scheduler's memory mirrors every lease in the store, so
// expiry needs no scan of the store.
struct Lease {
  uint32_t attempt = 0;
  int64_t lease_deadline_ms = 0;  // the store's deadline: renewed by heartbeats
  int64_t task_deadline_ms = 0;   // the lease never extends past this
  uint32_t trials = 0;            // the job's params.trials
  int64_t leased_ms = 0;          // when it was leased (the result-latency metric)
};

struct WorkerState {
  method::ProfileModel model;
  uint32_t capacity = 1;
  std::string version;  // recorded with the tasks it completes (store::Task::completed_by*)
  std::string host;
  std::string device;
  std::string numerics;
  std::string instance;
  int64_t registered_ms = 0;
  uint64_t tasks_completed = 0;  // results it delivered that passed the checks
  int64_t last_seen_ms = 0;
  std::set<PrefillKey> held;
  std::map<store::JobId, uint32_t> last_sample;  // affinity: sample given last, per job
  std::map<store::TaskKey, Lease> leased;
  std::set<store::JobId> refused_jobs;  // jobs it refused as a whole (RefuseJob)
};

using PendingSet = std::set<store::TaskKey>;  // canonical (sample, layer) order

class WorkerManager {
 public:
  // What the manager holds about a worker id beyond one registration: the failures charged to
  // it and its quarantine (FaultOptions). Erased once it holds nothing worth keeping.
  struct Health {
    std::vector<int64_t> failures;  // times charged, inside the quarantine window, oldest first
    int64_t quarantined_until = 0;  // ms; 0: not quarantined
    std::string quarantine_reason;
    std::string model_hash;    // of its last registration
    int64_t last_seen_ms = 0;  // when it was last heard from, as registered
  };

  // `store` is not owned and must outlive this object.
  WorkerManager(store::Store* store, const SchedulerOptions& options);

  // ---- The registry ----
  const std::map<std::string, WorkerState>& workers() const { return workers_; }
  WorkerState* Find(const std::string& worker_id);
  // The fresh state of `worker_id` (replacing any), its eviction forgotten.
  WorkerState& Add(const std::string& worker_id);
  // Forgets a registered worker and returns the leases it held; notes when it was last seen.
  std::map<store::TaskKey, Lease> Remove(const std::string& worker_id, int64_t now);
  // The error for a call naming a worker that is not registered: FailedPrecondition with the
  // reason when it was dropped for its model summary (Evict), else NotFound.
  Status UnknownWorker(const std::string& worker_id) const;
  void Evict(const std::string& worker_id, const std::string& why);
  // Why `worker_id` was evicted; null when it was not.
  const std::string* Evicted(const std::string& worker_id) const;

  // ---- Leases ----
  // The worker and its lease `lease`. NotFound: unknown worker; FailedPrecondition: not held now.
  [[nodiscard]] StatusOr<WorkerState*> HeldLease(const std::string& worker_id,
                                                 const LeaseId& lease);
  // Heartbeat: the worker is alive at `now` and holds the prefills `held`; each listed lease it
  // holds moves to min(now + lease_duration_ms, its task deadline) in the store and here (a lease
  // the store says is gone is forgotten). With `renew` false (the store cannot write) only the
  // liveness and prefills are recorded. NotFound / FailedPrecondition: UnknownWorker.
  [[nodiscard]] Status Heartbeat(const std::string& worker_id, std::span<const PrefillKey> held,
                                 std::span<const LeaseId> leases, int64_t now, bool renew);
  // Forgets every lease and the affinity of job `id` on every worker (the store released them
  // with the job's state change).
  void DropJobLeases(store::JobId id);

  // ---- Choosing a task ----
  // The task of `job` that `worker_id` is leased next, from `pending` (NextTask's order).
  std::optional<store::TaskKey> Choose(const std::string& worker_id, const WorkerState& worker,
                                       store::JobId job, const PendingSet& pending, int64_t now,
                                       const ResultManager& results) const;
  // Whether `key` may be leased to `worker_id` now (verification runs and failure exclusion).
  bool MayLease(const std::string& worker_id, const WorkerState& worker, const store::TaskKey& key,
                int64_t now, const ResultManager& results) const;
  // Whether a registered worker other than `worker_id`, of model `hash`, healthy, that has not
  // refused the job and neither failed nor ran `key`, could take `key`.
  bool OtherEligible(const std::string& worker_id, const std::string& hash,
                     const store::TaskKey& key, int64_t now, const ResultManager& results) const;

  // ---- Failures and health ----
  // Records a failed attempt of `key` on `worker_id`; returns the distinct workers it failed on.
  size_t CountTaskFailure(const store::TaskKey& key, const std::string& worker_id,
                          const std::string& why, int64_t now);
  // Forgets the failed attempts of job `id`'s tasks.
  void ForgetJobFailures(store::JobId id);
  bool Quarantined(const std::string& worker_id, int64_t now) const;
  // The health record of `worker_id`, created if missing, with its model and last heartbeat
  // refreshed from the registry while it is registered.
  Health& HealthOf(const std::string& worker_id);
  const std::map<std::string, Health>& health() const { return health_; }
  // Charges a failed attempt to `worker_id`; returns the quarantine reason when this charge
  // reaches quarantine_failures inside the window (and it is not quarantined already).
  std::optional<std::string> Charge(const std::string& worker_id, const std::string& why,
                                    int64_t now);
  // Marks `worker_id` quarantined for quarantine_ms from `now`; returns whether it was not
  // quarantined before.
  bool MarkQuarantined(const std::string& worker_id, const std::string& why, int64_t now);
  // Lifts quarantines that ran out and forgets idle health records; returns the quarantines
  // lifted.
  int LiftExpired(int64_t now);
  // Forgets the quarantine and failures of `worker_id`; returns why it was quarantined.
  // NotFound when it is not quarantined.
  [[nodiscard]] StatusOr<std::string> Lift(const std::string& worker_id, int64_t now);
  // Every registered worker and quarantined id, by id, as ListWorkers shows them.
  std::map<std::string, WorkerInfo> Infos(int64_t now) const;

 private:
  // A task's failed attempts: the distinct workers they failed on (max_attempts counts these),
  // when each last failed it (exclusion), and the last reason.
  struct TaskFailures {
    std::map<std::string, int64_t> failed_at;
    std::string last_reason;
  };

  store::Store* const store_;
  const SchedulerOptions options_;
  std::map<std::string, WorkerState> workers_;
  std::map<std::string, Health> health_;             // by worker id
  std::map<store::TaskKey, TaskFailures> failures_;  // dropped when the job ends
  // Workers dropped because their summary differs from the recorded one, with why; an entry goes
  // when the worker registers again.
  std::map<std::string, std::string> evicted_;
};

}  // namespace ripplekv::scheduler
