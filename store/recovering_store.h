#pragma once
// A Store that outlives its disk's write failures (docs/OPERATIONS.md, "A full disk"). It opens
// the RocksDB store at a path and forwards every call to it. Once a write has failed (a full disk,
// an I/O error), the inner store refuses every change itself (Store::write_failure) while reads
// go on; TryRecover(), called by the owner's timer, then closes the database and opens it again
// once the disk has room, with the leases as they are (the scheduler's leases did not die). A
// reopen is what a restart would do, minus the restart: RocksDB replays its write-ahead log, whose
// torn last record (the failed write) is dropped; every change that returned OK is kept.
//
// RocksDB 7.8 cannot resume writing to a log after a failed append (DB::Resume() reports OK, but
// the next write aborts the process on an assertion), which is why recovery reopens instead.
//
// Thread-safety: every method may be called from any thread. Calls run concurrently with each
// other; TryRecover waits for the calls in flight and holds new ones until it is done.

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

#include "store/store.h"

namespace ripplekv::store {

struct RecoveringStoreOptions {
  std::string path;     // the database directory
  StoreOptions store;   // for the first open; reopens keep the leases (release_leases_on_open)
  // TryRecover reopens only once the file system holding `path` has this much free space; less
  // is reported as ResourceExhausted without touching the database. 0: the memtable size of one
  // column family (StoreOptions::memtable_bytes / 4), what the first flush may need.
  uint64_t min_free_bytes = 0;
};

class RecoveringStore final : public Store {
 public:
  // Opens the store (OpenStore's contract and errors).
  [[nodiscard]] static StatusOr<std::unique_ptr<RecoveringStore>> Open(
      RecoveringStoreOptions options);

  // OK when the store is writable (again, or still). Otherwise: ResourceExhausted while the disk
  // has less than min_free_bytes free (nothing was tried), or the error of the reopen that failed
  // (reads then fail with Unavailable until a later call reopens it).
  [[nodiscard]] Status TryRecover();
  // How many reopens have succeeded so far.
  uint64_t reopens() const;

  uint64_t RecoveredLeases() const override;
  std::optional<WriteFailure> write_failure() const override;
  // The notes of the latest open (the first, or the reopen after a failed write, whose torn log
  // tail is the failed write's).
  std::vector<std::string> RecoveryNotes() const override;

  StatusOr<CreateJobOutcome> CreateJob(const JobSpec& spec,
                                       std::span<const PlannedTask> tasks) override;
  StatusOr<Job> GetJob(JobId id) const override;
  StatusOr<Job> GetJobMeta(JobId id) const override;
  StatusOr<std::vector<Job>> ListJobs(const ListJobsOptions& options) const override;
  StatusOr<Job> UpdateJobState(JobId id, JobState state, const std::string& error) override;
  StatusOr<Job> SetDataDescription(JobId id, std::string_view description) override;
  StatusOr<Job> ExtendJob(JobId id, uint32_t samples_planned,
                          std::span<const PlannedTask> tasks) override;

  StatusOr<Task> GetTask(const TaskKey& key) const override;
  StatusOr<std::vector<Task>> ListTasks(JobId job) const override;
  StatusOr<Task> LeaseTask(const TaskKey& key, const std::string& worker_id,
                           TimeMs deadline_ms) override;
  StatusOr<Task> ExtendLease(const TaskKey& key, const std::string& worker_id,
                             TimeMs deadline_ms) override;
  StatusOr<Task> ReleaseLease(const TaskKey& key, const std::string& worker_id) override;
  StatusOr<std::vector<TaskKey>> ReleaseExpiredLeases(TimeMs now_ms) override;
  StatusOr<std::vector<TaskKey>> ReopenTasks(JobId job, std::span<const TaskKey> keys) override;

  StatusOr<ResultWriteOutcome> PutResults(std::span<const TrialResult> results) override;
  StatusOr<ResultWriteOutcome> CompleteTask(const TaskKey& key,
                                            std::span<const TrialResult> results) override;
  std::vector<StatusOr<ResultWriteOutcome>> CompleteTasks(
      std::span<const Completion> completions) override;
  StatusOr<std::vector<TrialResult>> ListResults(JobId job) const override;
  StatusOr<std::vector<TrialResult>> ListTaskResults(const TaskKey& key) const override;
  StatusOr<uint64_t> CountResults(JobId job) const override;

  StatusOr<ProfileVersion> PutProfileVersion(const std::string& model_hash,
                                             const std::string& profile_json, JobId job) override;
  StatusOr<ProfileVersion> GetProfile(const std::string& model_hash,
                                      uint32_t version) const override;
  StatusOr<std::vector<ProfileVersion>> ListProfiles(const std::string& model_hash) const override;
  StatusOr<BudgetMapPut> PutBudgetMap(const std::string& model_hash, uint32_t profile_version,
                                      const std::string& budget_json) override;
  StatusOr<BudgetMapRecord> GetBudgetMap(const std::string& model_hash,
                                         uint32_t version) const override;
  StatusOr<BudgetMapRecord> GetBudgetMapByDigest(const std::string& model_hash,
                                                 const std::string& digest) const override;
  StatusOr<std::vector<BudgetMapRecord>> ListBudgetMaps(
      const std::string& model_hash) const override;

  StatusOr<RolloutRecord> CreateRollout(const RolloutRecord& rollout) override;
  Status WriteRollout(uint64_t id, const RolloutRecord* rollout,
                      std::span<const RolloutNodeRecord> nodes, bool sync) override;
  StatusOr<RolloutRecord> GetRollout(uint64_t id) const override;
  StatusOr<std::vector<RolloutRecord>> ListRollouts() const override;
  StatusOr<std::vector<RolloutNodeRecord>> ListRolloutNodes(uint64_t id) const override;

  StatusOr<std::string> PutModelSummary(const std::string& model_hash,
                                        const std::string& summary_json) override;
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListModelSummaries() const override;
  StatusOr<PurgeOutcome> PurgeFinishedJobs(TimeMs finished_before_ms, size_t max_jobs) override;
  StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) override;

 private:
  RecoveringStore(RecoveringStoreOptions options, std::unique_ptr<Store> inner);
  // Runs `call` on the open store under a shared lock; Unavailable while none is open (a failed
  // reopen). `call` returns a Status or StatusOr.
  template <typename Call>
  auto With(Call&& call) const -> decltype(call(std::declval<Store&>()));

  const RecoveringStoreOptions options_;
  uint64_t recovered_leases_ = 0;   // of the first open
  mutable std::shared_mutex mu_;    // shared: calls; exclusive: TryRecover
  std::unique_ptr<Store> inner_;    // guarded by mu_; null after a failed reopen
  uint64_t reopens_ = 0;            // guarded by mu_
};

}  // namespace ripplekv::store
