#pragma once
// The scheduler's durable state (docs/DESIGN.md §3) behind a typed interface: jobs and their tasks,
// trial results, profile versions and budget maps, domain types (store/types.h) in and out.
// OpenStore() gives the RocksDB implementation; layout and encoding are in docs/STORE.md.
//
// Durability: every method that changes state does so with ONE atomic write (a RocksDB
// WriteBatch across column families), so a process killed at any point (kill -9) leaves each
// change either fully applied or not at all; with StoreOptions::sync_writes a machine crash does
// too. A method that returns OK has made its change durable. On open, tasks that were leased
// return to pending (the leases died with the previous process).
//
// Thread-safety: every method may be called from any thread. Changes are serialized by an
// internal mutex (one writer at a time); reads run concurrently with them and see each change
// either entirely or not at all. A read method that returns several records reads them from one
// consistent snapshot; two separate calls may of course see different states. Only one process
// may open a database at a time (the second gets Unavailable).
//
// Bounded reads: the reads the scheduler makes per message or per tick (ListJobs with
// active_only, GetJobMeta, the lease recovery and expiry) cost O(active jobs and their tasks),
// whatever the number of finished jobs in history, and never read inline calibration data.
// History is kept until PurgeFinishedJobs deletes the bulk of finished jobs.
//
// Errors (absl::Status codes, which map one to one onto gRPC):
//   InvalidArgument     a malformed argument (named); never retry
//   NotFound            no such job, task, profile version or budget map
//   AlreadyExists       an idempotency key already names a job with a different spec
//   FailedPrecondition  an illegal state transition (e.g. cancelling a finished job, leasing a
//                       task that is leased or done), tasks or results of a purged job, or a
//                       database of another schema version
//   DataLoss            a stored value or key that does not decode; the message names the column
//                       family and the key; or, at open, a damaged file: a write-ahead log
//                       damaged before its tail (file and offset named; see
//                       StoreOptions::accept_wal_loss), a table file or the MANIFEST (named).
//                       Stop and shout: the database is damaged.
//   Unavailable         the database is locked by another process or store
//   ResourceExhausted   the disk is full, or a version counter ran out
//   Internal            any other RocksDB failure, with RocksDB's message

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/types.h"

namespace ripplekv::store {

struct StoreOptions {
  bool create_if_missing = true;  // create the database directory and column families if absent
  // fsync the write-ahead log on every change. Off, a change survives a process crash (kill -9)
  // but the last ones may be lost on a power failure; on, it survives both, and costs an fsync
  // per change (docs/STORE.md has the numbers).
  bool sync_writes = true;
  uint64_t max_value_bytes = 64ull << 20;  // largest encoded record (a job with inline data, a
                                           // profile, a budget map), bytes
  uint64_t max_tasks_per_job = 1u << 20;   // most tasks CreateJob accepts for one job
  // Wall clock for created/updated times, ms since the epoch; null = the system clock. Lease
  // deadlines are always passed in by the caller.
  std::function<TimeMs()> clock;
  // Called after every database write (a batch, synced or not, successful or not) and every
  // deferred log sync, with its duration in seconds, on the writing thread; null = not observed.
  // For the scheduler's write-latency metric (docs/OPERATIONS.md); it must be cheap and must not
  // call the store.
  std::function<void(double seconds)> write_observer;
  // Without it, tasks leased when the database was closed return to pending on open (the leases
  // died with the previous process). RecoveringStore reopens with it off: its leases live on.
  bool release_leases_on_open = true;
  // RocksDB's own log lines of level warning and above (`error`: error or fatal), instead of the
  // LOG file RocksDB would write into the database directory (which fills with the disk and must
  // not be written after a write failure); null = to stderr, prefixed "rocksdb: ".
  std::function<void(bool error, std::string_view line)> log;
  // Memory: memtables of all column families together are kept under memtable_bytes (a RocksDB
  // WriteBufferManager; each family's memtable flushes at a quarter of it), and one block cache
  // of block_cache_bytes serves every family. docs/OPERATIONS.md, "Memory".
  uint64_t memtable_bytes = 64ull << 20;
  uint64_t block_cache_bytes = 32ull << 20;
  // Damage in the write-ahead log with intact records after it (not a torn tail) makes the open
  // DataLoss, naming the log and offset. With this on, the open goes on instead: RocksDB's
  // point-in-time recovery keeps what precedes the damage and drops the rest, and
  // RecoveryNotes() says what was dropped. docs/STORE.md, "Corruption".
  bool accept_wal_loss = false;
};

// The first write failure of a store (see Store::write_failure).
struct WriteFailure {
  Status status;       // what every change returns from then on; no file paths in the message
  std::string detail;  // RocksDB's full description, for the operator's log (names files)
};

// One (sample, layer) of a job, as planned by the scheduler.
struct PlannedTask {
  uint32_t sample = 0;
  uint32_t layer = 0;
};

struct CreateJobOutcome {
  Job job;
  bool created = false;  // false: the idempotency key named an existing job with an equal spec
};

// What a write of trial results did. Results are keyed by (job, sample, layer, trial) and stored
// once: a result whose key is already stored (or repeated within the call) is a duplicate,
// counted and otherwise ignored; the first stored value stays.
struct ResultWriteOutcome {
  uint64_t stored = 0;          // results written by this call
  uint64_t duplicates = 0;      // results already present, not written
  uint64_t conflicts = 0;       // duplicates whose KL differs (bitwise) from the stored value; a
                                // determinism bug upstream worth logging
  bool task_completed = false;  // CompleteTask: this call moved the task to done (false: it
                                // was done already and every result was a duplicate)
};

struct ListJobsOptions {
  // Only pending and running jobs, read through the active-job index: the cost is O(active
  // jobs), independent of how many finished jobs are stored.
  bool active_only = false;
};

struct BudgetMapPut {
  BudgetMapRecord map;
  bool created = false;  // false: the same map was stored before; nothing was written
};

// What one Checkpoint call made.
struct CheckpointInfo {
  std::string dir;             // the checkpoint's directory, as given
  uint64_t bytes = 0;          // total size of its files, hard-linked ones counted in full (what
                               // copying it elsewhere takes), bytes
  TimeMs created_at_ms = 0;    // when it was taken (StoreOptions::clock), ms since the epoch
  std::string schema_version;  // the schema version of the copy (store/keys.h; docs/STORE.md)
};

// What one PurgeFinishedJobs call did.
struct PurgeOutcome {
  uint64_t purged = 0;  // jobs purged by this call (<= max_jobs)
  bool more = false;    // unpurged jobs that finished before the cutoff remain: call again
};

class Store {
 public:
  virtual ~Store() = default;

  // How many leased tasks Open returned to pending. Immutable after open.
  virtual uint64_t RecoveredLeases() const = 0;

  // Null while the store can write. From the first failed database write or log sync (a full
  // disk, an I/O error) on, the store issues no more writes, syncs, flushes or compactions to
  // RocksDB (which must not be written again after a failed write: the log file is in an
  // unknown state) and every change fails with the same status without touching the disk:
  // ResourceExhausted for a full disk, Unavailable otherwise. Reads go on. Only reopening the
  // database clears it (RecoveringStore, store/recovering_store.h).
  virtual std::optional<WriteFailure> write_failure() const { return std::nullopt; }

  // What the open dropped or repaired, one line each, for the operator's log: a torn last record
  // of the write-ahead log (file, offset, bytes), a damage accepted with
  // StoreOptions::accept_wal_loss (what was dropped), an id counter raised above the ids found in
  // the data. Empty after a clean open. Immutable after open.
  virtual std::vector<std::string> RecoveryNotes() const { return {}; }

  // ---- Jobs ----

  // Creates a pending job and its pending tasks in one write, allocating the next job id. If
  // spec.idempotency_key is non-empty and already names a job: returns that job (created =
  // false) when its spec equals `spec`, AlreadyExists otherwise; nothing is written.
  // InvalidArgument: bad model hash; params.trials == 0; an idempotency key over 1024 bytes; a
  // string that is not UTF-8; a non-finite alpha; `tasks` empty, over max_tasks_per_job or with
  // a (sample, layer) twice; the encoded job over max_value_bytes. Other checks of the method
  // (ranges of samples, layers, lengths) are the scheduler's.
  [[nodiscard]] virtual StatusOr<CreateJobOutcome> CreateJob(
      const JobSpec& spec, std::span<const PlannedTask> tasks) = 0;

  // The job with its full spec, spec.data_inline included (up to max_value_bytes; empty for a
  // purged job). NotFound when no job has this id.
  [[nodiscard]] virtual StatusOr<Job> GetJob(JobId id) const = 0;

  // The job record only: as GetJob with spec.data_inline left empty, one small read whatever the
  // size of the job's data. What to call per message (state, counters, model hash checks).
  // NotFound when no job has this id.
  [[nodiscard]] virtual StatusOr<Job> GetJobMeta(JobId id) const = 0;

  // Jobs by priority (highest first), then age (oldest first), then id. To keep listings small,
  // spec.data_inline is left empty and never read (GetJob returns it). Without active_only every
  // job ever stored is read (purged ones included); see ListJobsOptions.
  [[nodiscard]] virtual StatusOr<std::vector<Job>> ListJobs(
      const ListJobsOptions& options = {}) const = 0;

  // Moves a job to `state`, recording `error` (why it failed or was cancelled; may be empty).
  // Legal: pending -> running | failed | cancelled; running -> succeeded (every task done) |
  // failed | cancelled. Anything else, including leaving a final state or "moving" to the same
  // state, is FailedPrecondition naming both states. Entering a final state returns the job's
  // leased tasks to pending in the same write, and moves the job from the active index to the
  // finished one (PurgeFinishedJobs). Returns the updated job (spec.data_inline left empty).
  [[nodiscard]] virtual StatusOr<Job> UpdateJobState(JobId id, JobState state,
                                                     const std::string& error = {}) = 0;

  // Records the workers' description of the job's calibration set when the job has none yet
  // (the first report wins; a later one is ignored). Returns the job (spec.data_inline left
  // empty). NotFound; InvalidArgument
  // when `description` is empty, over 4 KiB or not UTF-8.
  [[nodiscard]] virtual StatusOr<Job> SetDataDescription(JobId id,
                                                         std::string_view description) = 0;

  // Begins the next round of an until_stable job (docs/SCHEDULER.md, "Rounds"), in one synced
  // write: adds `tasks` as pending tasks (each with a sample in [job.samples_planned,
  // samples_planned), none listed twice), raises tasks_total by their number, sets
  // samples_planned, and clears data_description (it names the sample count; the next round's
  // workers describe the data again). Returns the updated job (spec.data_inline left empty).
  // NotFound: the job; FailedPrecondition: the job is purged, not running, not until_stable, has
  // tasks not done, samples_planned is not in (job.samples_planned, params.max_samples], or a
  // task exists already; InvalidArgument: `tasks` empty, a sample outside the round, a task
  // listed twice, or the job over max_tasks_per_job.
  [[nodiscard]] virtual StatusOr<Job> ExtendJob(JobId id, uint32_t samples_planned,
                                                std::span<const PlannedTask> tasks) = 0;

  // ---- Tasks and leases ----

  // NotFound when the task does not exist; FailedPrecondition when its job was purged.
  [[nodiscard]] virtual StatusOr<Task> GetTask(const TaskKey& key) const = 0;

  // Every task of the job in canonical (sample, layer) order. NotFound for an unknown job;
  // FailedPrecondition "job N was purged at T ..." for a purged one.
  [[nodiscard]] virtual StatusOr<std::vector<Task>> ListTasks(JobId job) const = 0;

  // Leases a pending task of a pending or running job to `worker_id` until `deadline_ms`,
  // counting an attempt; a pending job becomes running in the same write. NotFound: job or task;
  // FailedPrecondition: the job is final, or the task is leased or done; InvalidArgument: worker
  // id empty, over 256 bytes or not UTF-8, deadline_ms <= 0. Returns the leased task.
  [[nodiscard]] virtual StatusOr<Task> LeaseTask(const TaskKey& key, const std::string& worker_id,
                                                 TimeMs deadline_ms) = 0;

  // Moves the deadline of a lease held by `worker_id` (a heartbeat). FailedPrecondition unless
  // the task is leased by that worker.
  [[nodiscard]] virtual StatusOr<Task> ExtendLease(const TaskKey& key, const std::string& worker_id,
                                                   TimeMs deadline_ms) = 0;

  // Returns a task leased by `worker_id` to pending (the worker refused it or went away).
  // FailedPrecondition unless the task is leased by that worker.
  [[nodiscard]] virtual StatusOr<Task> ReleaseLease(const TaskKey& key,
                                                    const std::string& worker_id) = 0;

  // Returns every leased task whose deadline is <= now_ms to pending, in one write, and lists
  // them in canonical order. Reads the tasks of active jobs only.
  [[nodiscard]] virtual StatusOr<std::vector<TaskKey>> ReleaseExpiredLeases(TimeMs now_ms) = 0;

  // Returns done tasks of a running job to pending and deletes their results, in one write
  // (synced with sync_writes): the scheduler recomputes what a worker found faulty produced
  // (docs/SCHEDULER.md, "Verified results"). The job's tasks_done and results_stored drop by what
  // was removed; completed_by is cleared; attempts stay. Keys of tasks that are not done are
  // skipped. Returns the keys reopened, in canonical order. NotFound: the job or a task;
  // InvalidArgument: a key of another job; FailedPrecondition: the job is not running.
  [[nodiscard]] virtual StatusOr<std::vector<TaskKey>> ReopenTasks(
      JobId job, std::span<const TaskKey> keys) = 0;

  // ---- Trial results ----

  // Stores results of one running job as they stream in, before their task completes (a task's
  // state does not change). Idempotent per key (see ResultWriteOutcome). An empty span writes
  // nothing. InvalidArgument: results of several jobs, trial >= params.trials, a non-finite KL;
  // NotFound: the job or a (sample, layer) task; FailedPrecondition: the job is not running.
  [[nodiscard]] virtual StatusOr<ResultWriteOutcome> PutResults(
      std::span<const TrialResult> results) = 0;

  // Stores `results` (all of task `key`; may be empty when PutResults stored them already) and
  // marks the task done, in one write (one WriteBatch: the results, the task record and the job's
  // counters, synced once with sync_writes), so a task is done exactly when every trial
  // 0..trials-1 of it has a result. Accepted from any worker while the task is not done (results
  // are deterministic; which lease it belonged to does not matter). On a task that is already done
  // every result is a duplicate and only the job's duplicate counters change.
  // InvalidArgument: a result of another task, trial >= params.trials, a non-finite KL;
  // NotFound: job or task; FailedPrecondition: the job is not running, or some trial would still
  // have no result (named; nothing is written).
  [[nodiscard]] virtual StatusOr<ResultWriteOutcome> CompleteTask(
      const TaskKey& key, std::span<const TrialResult> results) = 0;

  // CompleteTask for several tasks (of any jobs) in ONE write, synced once: the group commit of
  // completions that arrive together. Each completion is checked and answered as CompleteTask
  // would answer it alone (the outcomes are in the order of `completions`); one that fails writes
  // nothing and does not stop the others. A task completed twice in one call: the second is all
  // duplicates. Errors of the call itself (the write failed) fail every completion.
  struct Completion {
    TaskKey key;
    std::span<const TrialResult> results;
    // Recorded in the task when this completion moves it to done (Task::completed_by*).
    std::string worker_id;
    std::string worker_version;
  };
  [[nodiscard]] virtual std::vector<StatusOr<ResultWriteOutcome>> CompleteTasks(
      std::span<const Completion> completions) = 0;

  // The job's results in canonical (sample, layer, trial) order. NotFound for an unknown job;
  // FailedPrecondition for a purged one (also below).
  [[nodiscard]] virtual StatusOr<std::vector<TrialResult>> ListResults(JobId job) const = 0;
  // One task's results in trial order (possibly partial). NotFound for an unknown task.
  [[nodiscard]] virtual StatusOr<std::vector<TrialResult>> ListTaskResults(
      const TaskKey& key) const = 0;
  // How many results of the job are stored (counted in the results column family, not read
  // from the job's counter). NotFound for an unknown job.
  [[nodiscard]] virtual StatusOr<uint64_t> CountResults(JobId job) const = 0;

  // ---- Profiles and budget maps (versioned per model hash, never overwritten) ----

  // Stores `profile_json` (must parse as JSON) as the next version of `model_hash`'s profile
  // (1 for the first). With job != kNoJob it also finishes that job in the same write: the job
  // must be running with every task done and have spec.model_hash == model_hash; it becomes
  // succeeded with profile_version set. InvalidArgument: bad hash, not JSON, too large, hash
  // differs from the job's; NotFound: the job; FailedPrecondition: the job is not running or
  // has tasks left.
  [[nodiscard]] virtual StatusOr<ProfileVersion> PutProfileVersion(const std::string& model_hash,
                                                                   const std::string& profile_json,
                                                                   JobId job = kNoJob) = 0;

  // Version `version` of the hash's profile, or the latest with kLatestVersion. NotFound when
  // the hash has no profile or not that version.
  [[nodiscard]] virtual StatusOr<ProfileVersion> GetProfile(
      const std::string& model_hash, uint32_t version = kLatestVersion) const = 0;

  // Every profile version of `model_hash` (of every hash when empty), by hash (bytewise) then
  // version.
  [[nodiscard]] virtual StatusOr<std::vector<ProfileVersion>> ListProfiles(
      const std::string& model_hash = {}) const = 0;

  // Freezes `budget_json` (must parse as JSON) as a budget-map version of `model_hash` computed
  // from profile version `profile_version` (kLatestVersion: the latest, resolved and recorded as
  // a number), content-addressed by its digest (BudgetMapRecord::digest). Idempotent: when the
  // hash already has a map with this digest and the same bytes, returns it (created = false) and
  // writes nothing; otherwise allocates the next sequence number and writes the record and the
  // digest index in one batch. InvalidArgument: bad hash, not JSON, too large; NotFound: no such
  // profile version; AlreadyExists: the digest names a map with other bytes (a hash collision).
  [[nodiscard]] virtual StatusOr<BudgetMapPut> PutBudgetMap(const std::string& model_hash,
                                                            uint32_t profile_version,
                                                            const std::string& budget_json) = 0;

  // As GetProfile / ListProfiles, for budget maps (by sequence number).
  [[nodiscard]] virtual StatusOr<BudgetMapRecord> GetBudgetMap(
      const std::string& model_hash, uint32_t version = kLatestVersion) const = 0;
  // By content digest. NotFound when the hash has no map with it.
  [[nodiscard]] virtual StatusOr<BudgetMapRecord> GetBudgetMapByDigest(
      const std::string& model_hash, const std::string& digest) const = 0;
  [[nodiscard]] virtual StatusOr<std::vector<BudgetMapRecord>> ListBudgetMaps(
      const std::string& model_hash = {}) const = 0;

  // ---- Rollouts (docs/ROLLOUTS.md; their values in docs/STORE.md) ----

  // Stores `rollout` as a new rollout with the next id (1 for the first; rollout.id is ignored)
  // in one write and returns it with its id. InvalidArgument: a rollout the codec refuses (out of
  // its ranges, a string not UTF-8: store/codec.h), too large a value.
  [[nodiscard]] virtual StatusOr<RolloutRecord> CreateRollout(const RolloutRecord& rollout) = 0;

  // One atomic write of a change of rollout `id`: its record when `rollout` is non-null (its id is
  // ignored), and the given node records (inserted or replaced). With `sync` false the write
  // survives a process crash but not necessarily a power failure, whatever
  // StoreOptions::sync_writes says (for state the nodes report again on reconnect). NotFound: no
  // rollout `id`; InvalidArgument: a record the codec refuses, a bad or repeated node id, a value
  // too large.
  [[nodiscard]] virtual Status WriteRollout(uint64_t id, const RolloutRecord* rollout,
                                            std::span<const RolloutNodeRecord> nodes,
                                            bool sync = true) = 0;

  // NotFound when no rollout has this id.
  [[nodiscard]] virtual StatusOr<RolloutRecord> GetRollout(uint64_t id) const = 0;
  // Every rollout, by id.
  [[nodiscard]] virtual StatusOr<std::vector<RolloutRecord>> ListRollouts() const = 0;
  // The node records of rollout `id`, by node id (bytewise). NotFound: no such rollout.
  [[nodiscard]] virtual StatusOr<std::vector<RolloutNodeRecord>> ListRolloutNodes(
      uint64_t id) const = 0;

  // ---- Model summaries ----

  // Records `summary_json` (must parse as JSON, at most 64 KiB) as the summary of `model_hash`
  // unless one is stored already: the first report wins and is returned either way (the caller
  // compares). InvalidArgument: bad hash, not JSON, too large.
  [[nodiscard]] virtual StatusOr<std::string> PutModelSummary(const std::string& model_hash,
                                                              const std::string& summary_json) = 0;
  // Every stored summary as (model hash, summary JSON), by hash.
  [[nodiscard]] virtual StatusOr<std::vector<std::pair<std::string, std::string>>>
  ListModelSummaries() const = 0;

  // ---- Retention ----

  // Purges up to `max_jobs` jobs that entered a final state (succeeded, failed, cancelled) at a
  // time < finished_before_ms (ms since the epoch; the time is the job's updated_at_ms when it
  // became final), oldest first: deletes their tasks, trial results, inline data and
  // idempotency key, and keeps the job record (spec without data_inline, state, counters,
  // profile_version, error) with purged_at_ms set, so GetJob, GetJobMeta and ListJobs still show
  // the job. Afterwards GetTask, ListTasks, ListResults, ListTaskResults and CountResults of the
  // job are FailedPrecondition "job N was purged at T"; a CreateJob with its idempotency key
  // creates a new job. Profiles and budget maps are never deleted. All of a call's purges are
  // one write; then the call flushes the memtables and compacts the purged key ranges (this is
  // what returns the disk space; it runs outside the write lock and may take seconds for many
  // large jobs). Work per call is bounded by max_jobs (the finished jobs are found through an
  // index, not a scan). InvalidArgument when max_jobs is 0.
  [[nodiscard]] virtual StatusOr<PurgeOutcome> PurgeFinishedJobs(TimeMs finished_before_ms,
                                                                 size_t max_jobs) = 0;

  // ---- Backup ----

  // Writes a consistent copy of the whole database (every change that returned before the call
  // began, and each change entirely or not at all) to the new directory `dir`, with RocksDB's
  // checkpoint: table files are hard-linked when `dir` is on the database's file system (copied
  // otherwise), the write-ahead log is copied. The copy is a database OpenStore opens like the
  // original (docs/STORE.md, "Backup and restore"). Runs beside other calls without holding the
  // write lock; it flushes the memtables first, so it may take a moment under load. The copy is
  // private to its owner: its directories 0700, its files 0600 (hard-linked table files are the
  // live database's, which get the same mode).
  // InvalidArgument: `dir` empty, relative, or its parent is not an existing directory;
  // AlreadyExists: `dir` exists; ResourceExhausted: disk full; Internal: other RocksDB or file
  // system failures (nothing is left at `dir`). Every message names `dir`.
  [[nodiscard]] virtual StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) = 0;
};

// Opens (or with options.create_if_missing creates) the store in directory `path`, migrates a
// database of an older schema version in place (docs/STORE.md), then returns every leased task
// to pending in one write (RecoveredLeases() says how many). Errors:
// NotFound (no database and create_if_missing is false), Unavailable (another process or store
// holds it), FailedPrecondition (another schema version, or not a RippleKV database),
// DataLoss (a damaged record met during recovery, named), Internal (other RocksDB failures).
[[nodiscard]] StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                                         const StoreOptions& options = {});

// The RocksDB library this process runs with, "7.8.3" (for --version).
std::string RocksDbVersion();

}  // namespace ripplekv::store
