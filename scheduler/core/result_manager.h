#pragma once
// Results and the committer (docs/DESIGN.md §3.3, docs/SCHEDULER.md "Verified results"): the one
// rule for a task's results (InvalidTaskResult, CheckResults), the verification of a seeded
// fraction of tasks by two distinct workers (the runs held until a peer agrees, and each job's
// verification record), the completions whose store write is in flight (a lease no longer its
// worker's, still leased in the store), and the CompletionCommitter that writes them in groups.
//
// The manager decides and records; the Scheduler façade acts on its decisions (an outvoted
// worker quarantined and its work recomputed, a held run's lease released, a job failed when no
// two runs agree).
//
// Thread-safety: none of its own for its records (every method but the committer's and the held
// listener's requires the Scheduler's mutex); the committer runs its callbacks on its own thread;
// the held listener has its own mutex, never held with the Scheduler's.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/profile.h"
#include "scheduler/core/completion_committer.h"
#include "scheduler/core/core_metrics.h"
#include "scheduler/core/types.h"
#include "scheduler/core/worker_manager.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

class ResultManager {
 public:
  // A run of a task selected for verification, held until another agrees with it.
  struct VerifyRun {
    std::string worker_id;
    std::string numerics;
    std::vector<store::TrialResult> results;  // exactly the task's trials, by trial
  };
  struct Verification {
    std::vector<VerifyRun> runs;  // from distinct workers, in arrival order
    int64_t first_ms = 0;         // when the first run arrived
  };
  // What Verify decided about a checked run.
  struct Verdict {
    enum class Kind {
      kAgreed,       // two distinct workers agree: commit `results`; quarantine `outvoted`
      kUnverified,   // nobody can verify it: commit `results` unverified
      kHeld,         // held for a peer: release the lease
      kNoAgreement,  // max_attempts runs and no two agree: fail the job (`why`)
    };
    Kind kind = Kind::kHeld;
    std::vector<store::TrialResult> results;  // kAgreed, kUnverified: by trial
    std::vector<std::string> agreeing;        // kAgreed: the two workers that agree
    std::vector<std::string> outvoted;        // kAgreed: workers whose runs disagree
    std::string why;                          // kNoAgreement
  };
  using HeldCompletionListener =
      std::function<void(const std::string& worker_id, const store::TaskKey& key,
                         const StatusOr<TaskResultsOutcome>& outcome)>;

  // `store` is not owned and must outlive this object; so must `metrics`.
  ResultManager(store::Store* store, const SchedulerOptions& options, CoreMetrics& metrics);

  // ---- Checks ----
  // Why `results` are not exactly trials 0..trials-1 of `key`, each once, each passing the
  // aggregation's rule (InvalidTaskResult); empty when they are.
  static std::string CheckResults(const store::TaskKey& key, uint32_t trials,
                                  std::span<const store::TrialResult> results);

  // ---- Verification ----
  // Whether `key` of a job verifying `fraction` of its tasks is in the verification sample.
  bool Selected(const store::TaskKey& key, double fraction) const;
  // A checked run of `key` by `worker_id` (its numerics string), at `now`: held, agreed, failed
  // or unverified (see "Verified results"). `other_eligible` says whether another worker could
  // run `key` now; it is asked only when the run is the first and waited verify_wait_ms.
  Verdict Verify(const std::string& worker_id, const std::string& numerics,
                 const store::TaskKey& key, std::vector<store::TrialResult> results, int64_t now,
                 const std::function<bool()>& other_eligible);
  // Whether `worker_id` has a run of `key` held.
  bool RanBy(const store::TaskKey& key, const std::string& worker_id) const;
  bool AnyHeld() const { return !verifying_.empty(); }
  // The held runs of `key`; null when none.
  const Verification* Held(const store::TaskKey& key) const;
  // Drops every held run of `worker_id` (it was quarantined: its runs are suspect).
  void DropRunsOf(const std::string& worker_id);
  // The held first runs that waited verify_wait_ms at `now`, with their workers.
  std::vector<std::pair<store::TaskKey, std::string>> Waited(int64_t now) const;
  // Takes the held first run of `key` to commit unverified.
  VerifyRun TakeUnverified(const store::TaskKey& key);
  // Whether `worker_id` was outvoted in job `job` (what it completes there is redone).
  bool Outvoted(store::JobId job, const std::string& worker_id) const;
  // `n` done tasks of `job` were reopened for recomputation.
  void CountRecomputed(store::JobId job, uint64_t n);
  // The job's verification record as its profile states it.
  method::ProfileVerification ProfileVerificationOf(store::JobId job, double fraction) const;
  // Fills progress.tasks_verified and disagreements.
  void FillProgress(JobProgress& progress) const;

  // ---- Completions in flight ----
  // The results of `worker_id`'s `lease` of `key` were submitted: until their write lands the
  // lease is completing (it expires from here like any other, should the write fail).
  void StartCompleting(const store::TaskKey& key, const std::string& worker_id, const Lease& lease);
  // The write of `key` landed: forgets it if it is still `attempt`'s; returns when that lease
  // was leased, or -1.
  int64_t FinishCompleting(const store::TaskKey& key, uint32_t attempt);
  void EraseCompleting(const store::TaskKey& key) { completing_.erase(key); }
  struct Completing {
    std::string worker_id;
    Lease lease;
  };
  const std::map<store::TaskKey, Completing>& completing() const { return completing_; }

  // Forgets everything kept for job `id` (it ended).
  void ForgetJob(store::JobId id);

  // ---- The committer ----
  CompletionCommitter& committer() { return committer_; }
  const CompletionCommitter& committer() const { return committer_; }
  void SetHeldListener(HeldCompletionListener listener);
  // Tells the held listener (if any) of a held run's outcome.
  void NotifyHeld(const std::string& worker_id, const store::TaskKey& key,
                  const StatusOr<TaskResultsOutcome>& outcome);

 private:
  // A job's verification record, for its progress and its profile.
  struct JobVerification {
    uint64_t verified = 0;
    uint64_t unverified = 0;
    uint64_t recomputed = 0;
    std::vector<method::ProfileVerification::Disagreement> disagreements;
    std::set<std::string> outvoted;  // workers outvoted in this job: what they complete is redone
  };

  const SchedulerOptions options_;
  CoreMetrics& metrics_;
  const uint64_t verify_key_;      // FaultOptions::verify_key or random
  CompletionCommitter committer_;  // completions' store writes, grouped (no lock of the core)
  std::map<store::TaskKey, Completing> completing_;       // results submitted, write pending
  std::map<store::TaskKey, Verification> verifying_;      // held runs; dropped when the job ends
  std::map<store::JobId, JobVerification> verification_;  // dropped when the job ends
  std::mutex listener_mu_;                // held while the listener runs; never with the core's
  HeldCompletionListener held_listener_;  // guarded by listener_mu_
};

// Whether task `key` is in the verification sample of a job verifying `fraction` of its tasks,
// under `verify_key`: a hash of (key, job, sample, layer) below fraction, so each task is drawn
// independently with probability `fraction` (0: none; 1: all).
bool VerificationSelected(uint64_t verify_key, const store::TaskKey& key, double fraction);

// Whether two runs' results of one task agree: trial by trial, bitwise when `same_numerics`, else
// within `rel_tolerance` relative (|a - b| <= rel_tolerance * max(|a|, |b|) + 1e-12). Both are
// exactly the task's trials.
bool ResultsAgree(std::span<const store::TrialResult> a, std::span<const store::TrialResult> b,
                  bool same_numerics, double rel_tolerance);

// The relative tolerance for two workers' numerics strings ("<device class>/<build>"): 1e-2
// between two "cpu-fp32" builds, 5e-2 when either is on CUDA or unknown. Equal non-empty strings
// agree bitwise instead (ResultsAgree's same_numerics).
double NumericsTolerance(std::string_view a, std::string_view b);

// Why `r` cannot be a result of task `key` of a job with `trials` trials (another task's, a trial
// out of range, or repeated when `trial_seen`, a KL that fails method::CheckTrialKl), one line;
// empty when it can. The one rule for results, where they arrive and where a task completes.
std::string InvalidTaskResult(const store::TaskKey& key, uint32_t trials,
                              const store::TrialResult& r, bool trial_seen);

}  // namespace ripplekv::scheduler
