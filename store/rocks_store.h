#pragma once
// The RocksDB implementation of Store (store/store.h). Internal to store/: callers use
// OpenStore(). Its methods are defined in rocks_store.cc (open, recovery, jobs),
// rocks_store_tasks.cc (leases, results), rocks_store_versions.cc (profiles, budget maps),
// rocks_store_rollouts.cc (rollouts), rocks_store_migrate.cc (older schema versions),
// rocks_store_purge.cc (retention), rocks_store_checkpoint.cc (backup) and
// rocks_store_recovery.cc (id counters after recovery); wal_check.cc reads the write-ahead logs
// before the open.

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"
#include "store/decoded_jobs.h"
#include "store/store.h"
#include "store/wal_check.h"

namespace ripplekv::store {

// RocksDB status -> absl::Status with `context` prefixed (see the error list in store.h).
Status FromRocks(const rocksdb::Status& status, std::string_view context);

// OpenStore over `env` (its file system, threads and clock) instead of rocksdb::Env::Default():
// the injection point for tests that simulate faults (tests/store/power_loss_fs.h). The store
// shares ownership of `env`; null means the default. Same contract and errors as OpenStore.
[[nodiscard]] StatusOr<std::unique_ptr<Store>> OpenRocksStore(const std::string& path,
                                                              const StoreOptions& options,
                                                              std::shared_ptr<rocksdb::Env> env);

// Holds a RocksDB snapshot for its lifetime: for reads that return several records.
class SnapshotHolder {
 public:
  explicit SnapshotHolder(rocksdb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {}
  ~SnapshotHolder() { db_->ReleaseSnapshot(snapshot_); }
  SnapshotHolder(const SnapshotHolder&) = delete;
  SnapshotHolder& operator=(const SnapshotHolder&) = delete;
  const rocksdb::Snapshot* get() const { return snapshot_; }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
};

class RocksStore final : public Store {
 public:
  static StatusOr<std::unique_ptr<RocksStore>> Open(const std::string& path,
                                                    const StoreOptions& options,
                                                    std::shared_ptr<rocksdb::Env> env);
  ~RocksStore() override;
  RocksStore(const RocksStore&) = delete;
  RocksStore& operator=(const RocksStore&) = delete;

  uint64_t RecoveredLeases() const override { return recovered_leases_; }
  std::vector<std::string> RecoveryNotes() const override { return recovery_notes_; }
  std::optional<WriteFailure> write_failure() const override;

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
  std::vector<StatusOr<ResultWriteOutcome>> CompleteTasks(
      std::span<const Completion> completions) override;
  StatusOr<ResultWriteOutcome> CompleteTask(const TaskKey& key,
                                            std::span<const TrialResult> results) override;
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

  StatusOr<PurgeOutcome> PurgeFinishedJobs(TimeMs finished_before_ms, size_t max_jobs) override;
  StatusOr<std::string> PutModelSummary(const std::string& model_hash,
                                        const std::string& summary_json) override;
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListModelSummaries() const override;
  StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) override;

 private:
  // Column families, in the order of kCfNames in rocks_store.cc.
  enum Cf : size_t {
    kJobs,
    kTasks,
    kResults,
    kProfiles,
    kBudgetMaps,
    kMeta,
    kJobData,
    kActiveJobs,
    kFinishedJobs,
    kRollouts,
    kRolloutNodes,
    kNumCfs
  };
  // Called for each (key, value) of a scan; a non-OK status stops the scan and is returned.
  using ScanFn = std::function<Status(std::string_view key, std::string_view value)>;

  RocksStore(StoreOptions options, std::shared_ptr<rocksdb::Env> env,
             std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles);

  // ---- Reads (no lock needed) ----
  // The raw value, or nullopt when the key is absent.
  StatusOr<std::optional<std::string>> Get(Cf cf, std::string_view key,
                                           const rocksdb::Snapshot* snapshot = nullptr) const;
  // Every key starting with `prefix` in order (`prefix` empty: the whole column family), from
  // one snapshot (`snapshot`, or the iterator's own when null). `values` false skips reading
  // values (`value` is then empty).
  Status Scan(Cf cf, std::string_view prefix, const ScanFn& fn, bool values = true,
              const rocksdb::Snapshot* snapshot = nullptr) const;
  // NotFound when absent. spec.data_inline is read only `with_data` (a second record, read from
  // the same snapshot as the first). Reads at `snapshot` when non-null.
  StatusOr<Job> ReadJob(JobId id, bool with_data = false,
                        const rocksdb::Snapshot* snapshot = nullptr) const;
  // ReadJob, then FailedPrecondition "job N was purged at T" when it was: for the reads of a
  // job's tasks and results.
  StatusOr<Job> ReadUnpurgedJob(JobId id) const;
  StatusOr<Task> ReadTask(const TaskKey& key) const;  // NotFound when absent
  StatusOr<std::vector<Task>> ScanTasks(JobId job) const;
  // Every job record in id order, spec.data_inline left empty.
  StatusOr<std::vector<Job>> ScanJobs() const;
  // The active (pending, running) jobs through the active_jobs index, in id order, from one
  // snapshot; spec.data_inline left empty.
  StatusOr<std::vector<Job>> ScanActiveJobs() const;
  // Results whose key starts with `prefix` (a job's or a task's), in canonical order.
  StatusOr<std::vector<TrialResult>> ScanResults(std::string_view prefix) const;
  // Latest version under `model_hash` in kProfiles or kBudgetMaps; 0 when none.
  StatusOr<uint32_t> LatestVersion(Cf cf, const std::string& model_hash) const;
  // The budget map `version` of `model_hash`; NotFound when absent. Reads at `snapshot` when
  // non-null.
  StatusOr<BudgetMapRecord> ReadBudgetMap(const std::string& model_hash, uint32_t version,
                                          const rocksdb::Snapshot* snapshot = nullptr) const;
  // The budget map the digest index names for (`model_hash`, `digest`), or nullopt when it
  // names none; index and record are read from one snapshot. DataLoss when the index entry is
  // malformed or names a missing map or one with another digest.
  StatusOr<std::optional<BudgetMapRecord>> FindBudgetMap(const std::string& model_hash,
                                                         const std::string& digest) const;
  // The rollout's record; NotFound when absent. Reads at `snapshot` when non-null.
  StatusOr<RolloutRecord> ReadRollout(uint64_t id,
                                      const rocksdb::Snapshot* snapshot = nullptr) const;

  // ---- Writes (callers hold write_mu_) ----
  Status Write(rocksdb::WriteBatch* batch);
  // Writes the job record; never the inline data (written once by CreateJob).
  Status PutJob(rocksdb::WriteBatch* batch, const Job& job) const;
  // Writes `job`, which has just entered a final state at job.updated_at_ms, and moves it from
  // the active index to the finished index.
  Status PutFinishedJob(rocksdb::WriteBatch* batch, const Job& job) const;
  Status Delete(rocksdb::WriteBatch* batch, Cf cf, std::string_view key) const;
  Status PutTask(rocksdb::WriteBatch* batch, const Task& task) const;
  // A batch that only moves leases (and, with the first lease, a job from pending to running):
  // written without an fsync even with sync_writes. Its loss at a power cut changes nothing a
  // reopen keeps, since Open returns every leased task to pending (and a pending job with done
  // tasks is running again at its next lease); and a later synced write makes it durable as well,
  // the log being sequential. Halves the fsyncs per task (docs/STORE.md, "Durability").
  Status WriteLeases(rocksdb::WriteBatch* batch);
  // A batch written with sync_writes that is made durable by a later SyncLog() outside
  // write_mu_, so that other read-modify-writes (leases) do not wait for the fsync. Readers may
  // see it before it is durable; the log being sequential, a power cut loses it only together
  // with everything written after it, so what a reopen finds is still a prefix of the history.
  Status WriteUnsynced(rocksdb::WriteBatch* batch);
  // Every write goes through here: db_->Write timed for StoreOptions::write_observer.
  Status ObservedWrite(const rocksdb::WriteOptions& write_options, rocksdb::WriteBatch* batch,
                       std::string_view what);
  // With sync_writes: fsyncs the log, making every write made so far durable. Without write_mu_.
  Status SyncLog();
  // The latched write failure's status, or OK: checked before anything that writes to RocksDB.
  Status CheckWritable() const;
  // Latches the first failed write or sync (`s`, while doing `what`) and returns the status every
  // change returns from then on (store.h, Store::write_failure).
  Status LatchWriteFailure(const rocksdb::Status& s, std::string_view what);
  Status PutRaw(rocksdb::WriteBatch* batch, Cf cf, std::string_view key,
                std::string_view value) const;
  // Adds "leased -> pending" of every leased task of the active jobs matching `expired` to
  // `batch`; returns their keys in canonical order.
  StatusOr<std::vector<TaskKey>> ReleaseLeasesWhere(
      rocksdb::WriteBatch* batch, const std::function<bool(const Task&)>& expired);
  // Checks the schema version (writing it into a new database, migrating an older one) and
  // recovers leases.
  Status Initialize();
  // Rewrites a schema-version-1 database as version 2 in one write (rocks_store_migrate.cc):
  // inline data to job_data, the active and finished indexes built from the job records.
  Status MigrateFromV1();
  // Rewrites a schema-version-2 database as version 3 in one write (rocks_store_migrate.cc):
  // every budget map re-encoded with its digest, and the digest index.
  Status MigrateFromV2();
  // Rewrites a schema-version-3 database as version 4 in one write (rocks_store_migrate.cc):
  // every rollout and rollout node value, stored as the API's protobuf bytes, re-encoded as the
  // store's own (store/legacy/decode_v3_rollouts.h reads the old bytes).
  Status MigrateFromV3();
  // Raises meta next_job_id and next_rollout_id, when needed, above every id in the data: the
  // last key of jobs and rollouts, and, with `dropped` (an accepted write-ahead-log loss), the
  // ids the dropped records held (rocks_store_recovery.cc). Adds a note for each one raised.
  Status RaiseIdCounters(const DroppedWrites* dropped);
  // Flushes every memtable (so that old WAL files are released) and compacts [begin, end) of
  // the column families a purge deleted from.
  Status CompactPurged(std::string_view begin, std::string_view end);
  // Called after a write that moved `jobs` jobs to a final state. Each leaves a deletion
  // (tombstone) in active_jobs that every active-only listing would step over until compaction
  // drops it; so every kActiveIndexCompactionEvery such jobs, and on open, the (small) column
  // family is flushed and compacted. A failure here is ignored: the write it follows succeeded
  // and the index stays correct, only slower to read.
  void NoteJobsFinished(uint64_t jobs);
  void CompactActiveIndex();
  TimeMs Now() const;
  // Makes `task` pending with no owner and no deadline.
  static void ClearLease(Task* task);
  // A DataLoss naming the column family and key, with `status`'s message.
  static Status Damaged(Cf cf, std::string_view key, const Status& status);
  static std::string_view CfName(Cf cf);

  // Immutable after construction.
  const StoreOptions options_;
  std::shared_ptr<rocksdb::Env> env_;  // null: rocksdb::Env::Default(); outlives db_
  std::unique_ptr<rocksdb::DB> db_;
  std::array<rocksdb::ColumnFamilyHandle*, kNumCfs> cf_{};
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;   // every handle opened, for closing
  uint64_t recovered_leases_ = 0;                       // set by Initialize()
  std::vector<std::string> recovery_notes_;             // set by Open()
  std::atomic<uint64_t> finished_since_compaction_{0};  // see NoteJobsFinished

  std::atomic<bool> write_failed_{false};  // set once, by LatchWriteFailure
  mutable std::mutex failure_mu_;
  std::optional<WriteFailure> write_failure_;  // guarded by failure_mu_

  std::mutex write_mu_;               // serializes every read-modify-write
  mutable DecodedJobs decoded_jobs_;  // ReadJob's parses
};

}  // namespace ripplekv::store
