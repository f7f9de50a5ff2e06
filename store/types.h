#pragma once
// Domain types of the scheduler's durable state (docs/DESIGN.md §3): jobs, their tasks, trial
// results, profile versions, budget maps and rollouts. Plain structs, no protobuf and no RocksDB:
// the gRPC adapters in scheduler/service/ convert to and from these, and store/store.h keeps them.
//
// Units: times are milliseconds since the Unix epoch (UTC) in an int64 (`TimeMs`); token counts
// are tokens; KL divergences are nats.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "method/calibration_params.h"

namespace ripplekv::store {

// Milliseconds since 1970-01-01T00:00:00Z.
using TimeMs = int64_t;

// Job ids are allocated by Store::CreateJob from 1 upwards, never reused. 0 means "no job".
using JobId = uint64_t;
inline constexpr JobId kNoJob = 0;

// Profile and budget-map versions count from 1 per model hash. 0 means "the latest" in lookups.
inline constexpr uint32_t kLatestVersion = 0;

// How workers read a job's calibration data (worker/data/calibration_data.h).
enum class DataFormat : uint8_t {
  kAuto = 0,   // by the path's extension (.jsonl/.ndjson/.json are JSONL); data_path only
  kJsonl = 1,  // one JSON object per line
  kText = 2,   // plain text cut into windows of C + W tokens
};

// What a client submits. The store checks only what its own invariants need (see
// Store::CreateJob); validating the method belongs to the scheduler.
struct JobSpec {
  std::string model_path;   // model reference as workers resolve it (a path or a name)
  std::string model_hash;   // expected model hash (docs/MODEL_HASH.md), 1..256 bytes, no NUL
  std::string data_inline;  // calibration data itself (JSONL or text); empty when by path
  std::string data_path;    // calibration data path visible to workers; empty when inline
                            // (both empty: the built-in corpus `data_builtin`)
  // data_inline: kJsonl or kText (what was submitted); data_path: as submitted (kAuto: by the
  // extension); built-in corpus: kAuto.
  DataFormat data_format = DataFormat::kAuto;
  bool data_strict = false;  // a JSONL record with too few tokens fails the job instead of a skip
  std::string data_builtin;  // built-in corpus name when neither inline nor path; empty: default
  // The calibration method's parameters as submitted (method/calibration_params.h; the scheduler
  // checks them with ValidateCalibrationParams). With until_stable (docs/SCHEDULER.md, "Rounds"),
  // Job::samples_planned counts the rounds' samples begun.
  method::CalibrationParams params;
  int32_t priority = 0;         // higher runs first
  std::string idempotency_key;  // empty = none; else a resubmission returns the existing job
  // The fraction of the job's tasks the scheduler runs again on a second, distinct worker whose
  // results must agree (docs/SCHEDULER.md, "Verified results"), 0..1; not a method parameter:
  // it never changes the profile's numbers. 0 (the default here, and what records from before
  // it decode as): nothing verified; the scheduler resolves a submitted job's default.
  double verify_fraction = 0;

  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

enum class JobState : uint8_t {
  kPending = 0,    // created, no task leased yet
  kRunning = 1,    // at least one task leased at some point
  kSucceeded = 2,  // every task done (and, when finished by PutProfileVersion, a profile written)
  kFailed = 3,
  kCancelled = 4,
};
// Succeeded, failed and cancelled are final: no transition leaves them.
bool IsTerminal(JobState state);

struct Job {
  JobId id = kNoJob;
  JobSpec spec;
  JobState state = JobState::kPending;
  TimeMs created_at_ms = 0;
  TimeMs updated_at_ms = 0;          // last state or counter change
  uint64_t tasks_total = 0;          // tasks planned by CreateJob and ExtendJob
  uint64_t tasks_done = 0;           // tasks in state done
  uint64_t results_stored = 0;       // distinct trial results stored (each key once)
  uint64_t duplicate_results = 0;    // results received again and ignored
  uint64_t conflicting_results = 0;  // of those, results whose KL differed from the stored one
  uint32_t profile_version = 0;      // profile version written when the job finished; 0 = none
  std::string error;                 // why the job failed or was cancelled; empty otherwise
  // The calibration set as the first worker to report it described it (source, shape, token
  // fingerprint); empty until then (Store::SetDataDescription).
  std::string data_description;
  // When Store::PurgeFinishedJobs deleted the job's tasks, results and inline data; 0 = never.
  // A purged job keeps this record (spec without data_inline, state, counters, error).
  TimeMs purged_at_ms = 0;
  // Size of the inline calibration data, bytes, also where spec.data_inline is left empty
  // (listings, GetJobMeta, purged jobs); 0 when the data is not inline.
  uint64_t data_inline_bytes = 0;
  // Samples planned so far: spec.params.samples at creation, raised by Store::ExtendJob for each
  // round of an until_stable job. The job's tasks are these samples x its layers.
  uint32_t samples_planned = 0;

  friend bool operator==(const Job&, const Job&) = default;
};

// A unit of work: all trials of one (sample, layer) of a job. Ordered by (job, sample, layer),
// the store's canonical order.
struct TaskKey {
  JobId job = kNoJob;
  uint32_t sample = 0;
  uint32_t layer = 0;

  friend auto operator<=>(const TaskKey&, const TaskKey&) = default;
};

enum class TaskState : uint8_t {
  kPending = 0,  // waiting for a worker
  kLeased = 1,   // handed to lease_owner until lease_deadline_ms
  kDone = 2,     // every trial's result stored; final
};

struct Task {
  TaskKey key;
  TaskState state = TaskState::kPending;
  std::string lease_owner;       // worker id while leased; empty otherwise
  TimeMs lease_deadline_ms = 0;  // while leased; 0 otherwise
  uint32_t attempts = 0;         // times the task was leased
  // Once done: the worker whose results completed it and the version it reported at registration
  // ("ripplekv 0.1.0 (REVISION)"); empty when not recorded (completed without a worker named, or
  // before these fields existed).
  std::string completed_by;
  std::string completed_by_version;

  friend bool operator==(const Task&, const Task&) = default;
};

// One measured trial. Identified by (job, sample, layer, trial): stored at most once.
struct TrialResult {
  JobId job = kNoJob;
  uint32_t sample = 0;
  uint32_t layer = 0;
  uint32_t trial = 0;  // < the job's params.trials
  double kl = 0.0;     // mean KL over the probe positions, nats; finite

  friend bool operator==(const TrialResult&, const TrialResult&) = default;
};

// One immutable version of a model's sensitivity profile.
struct ProfileVersion {
  std::string model_hash;
  uint32_t version = 0;      // 1, 2, ... per model hash, allocated by the store
  std::string profile_json;  // the profile document (docs/BUDGETS.md schema), valid JSON
  JobId job = kNoJob;        // the job that measured it; kNoJob for an imported profile
  TimeMs created_at_ms = 0;

  friend bool operator==(const ProfileVersion&, const ProfileVersion&) = default;
};

// One immutable, content-addressed version of a budget map computed from a profile version of the
// same model (docs/ROLLOUTS.md).
struct BudgetMapRecord {
  std::string model_hash;
  uint32_t version = 0;          // the sequence number: 1, 2, ... per model hash, by the store
  uint32_t profile_version = 0;  // the profile version it was computed from (exists)
  std::string budget_json;       // the frozen map document, valid JSON
  // The content id: the first 16 lowercase hex digits of SHA-256(budget_json), computed by the
  // store. Unique per model hash.
  std::string digest;
  TimeMs created_at_ms = 0;

  friend bool operator==(const BudgetMapRecord&, const BudgetMapRecord&) = default;
};

// Where a rollout stands (docs/ROLLOUTS.md, "States").
enum class RolloutState : uint8_t {
  kRunning = 0,     // "running": moving through its stages
  kPaused = 1,      // "paused": stopped where it is; pause_reason says why
  kSucceeded = 2,   // "succeeded": every stage done; its map is the model's active one
  kRolledBack = 3,  // "rolled_back": the previous map was restored
};

// How a node stands with the version it is assigned.
enum class NodeMapState : uint8_t {
  kUnspecified = 0,  // "unspecified": a report about another version than the assigned one
  kPending = 1,      // "pending": assigned, not yet reported
  kApplied = 2,      // "applied": reported written and applied
  kFailed = 3,       // "failed": reported a failure (error)
};

// Which nodes a rollout stage covers: exactly one of a node count or a share of the model's
// connected nodes. A stored stage always has exactly one; a requested one may have neither.
struct RolloutStage {
  std::optional<int32_t> nodes;   // >= 1
  std::optional<double> percent;  // (0, 100]

  friend bool operator==(const RolloutStage&, const RolloutStage&) = default;
};

// A rollout's durable state (docs/ROLLOUTS.md; its value in docs/STORE.md, "rollouts").
struct RolloutRecord {
  uint64_t id = 0;                   // 1, 2, ... allocated by Store::CreateRollout (the key)
  std::string model_hash;            // 1..kMaxModelHashBytes bytes
  std::string map_version;           // the budget map version it rolls out (a digest)
  std::string previous_version;      // the model's active map when it started; "" none
  std::vector<RolloutStage> stages;  // at least one, each with exactly one size
  int64_t soak_ms = 0;               // >= 0: least time a stage is held once acknowledged
  int64_t stage_timeout_ms = 0;      // > 0: longest time a stage may take before it pauses
  double min_ack_share = 1.0;        // (0, 1]: acknowledged share of a stage's nodes to advance
  RolloutState state = RolloutState::kRunning;
  int32_t stage = 0;         // index into stages of the current (or last) stage
  std::string pause_reason;  // set when paused (kept after a rollback from paused)
  TimeMs created_at_ms = 0;
  TimeMs updated_at_ms = 0;
  TimeMs stage_started_at_ms = 0;

  friend bool operator==(const RolloutRecord&, const RolloutRecord&) = default;
};

// One serving node's state in a rollout (its value in docs/STORE.md, "rollout_nodes").
struct RolloutNodeRecord {
  std::string node_id;           // 1..kMaxNodeIdBytes bytes (the key)
  bool in_rollout = false;       // assigned the rollout's map (false: kept the previous map)
  std::string assigned_version;  // what the node is told to hold; "" no map
  std::string held_version;      // what the node last reported holding; "" none or unknown
  NodeMapState state = NodeMapState::kUnspecified;  // of assigned_version
  std::string error;                                // the failure, one line, when state is kFailed
  TimeMs updated_at_ms = 0;

  friend bool operator==(const RolloutNodeRecord&, const RolloutNodeRecord&) = default;
};

// Lower-case names used in messages and in the stored encoding: "jsonl", "pending", "leased"...
std::string_view DataFormatName(DataFormat format);
std::string_view JobStateName(JobState state);
std::string_view TaskStateName(TaskState state);
std::string_view RolloutStateName(RolloutState state);
std::string_view NodeMapStateName(NodeMapState state);
// Inverses of the above; nullopt for any other string.
std::optional<DataFormat> ParseDataFormat(std::string_view name);
std::optional<JobState> ParseJobState(std::string_view name);
std::optional<TaskState> ParseTaskState(std::string_view name);
std::optional<RolloutState> ParseRolloutState(std::string_view name);
std::optional<NodeMapState> ParseNodeMapState(std::string_view name);

}  // namespace ripplekv::store
