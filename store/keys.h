#pragma once
// Key layout of the store's column families (docs/STORE.md). Integers are big-endian so that
// RocksDB's byte-wise order is the canonical order: tasks by (job, sample, layer), results by
// (job, sample, layer, trial), versions by (model hash, version). Internal to store/.
//
// All functions are pure and thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/types.h"

namespace ripplekv::store {

// Column family names. "default" is unused (RocksDB requires it to exist).
inline constexpr std::string_view kJobsCf = "jobs";
inline constexpr std::string_view kTasksCf = "tasks";
inline constexpr std::string_view kResultsCf = "results";
inline constexpr std::string_view kProfilesCf = "profiles";
inline constexpr std::string_view kBudgetMapsCf = "budget_maps";
inline constexpr std::string_view kMetaCf = "meta";
// Since schema version 2: inline calibration data, and the two job indexes.
inline constexpr std::string_view kJobDataCf = "job_data";
inline constexpr std::string_view kActiveJobsCf = "active_jobs";
inline constexpr std::string_view kFinishedJobsCf = "finished_jobs";

// Since schema version 3: rollouts and their per-node records.
inline constexpr std::string_view kRolloutsCf = "rollouts";
inline constexpr std::string_view kRolloutNodesCf = "rollout_nodes";

// Keys of the meta column family.
inline constexpr std::string_view kSchemaVersionKey = "schema_version";  // value: decimal text
// The schema version (key layout + value format) this code writes and reads. Versions 1 (before
// the job_data, active_jobs and finished_jobs column families), 2 (before budget-map digests
// and rollouts) and 3 (rollout values as the API's protobuf bytes) are migrated on open.
inline constexpr std::string_view kSchemaVersion = "4";
inline constexpr std::string_view kSchemaVersion1 = "1";
inline constexpr std::string_view kSchemaVersion2 = "2";
inline constexpr std::string_view kSchemaVersion3 = "3";
inline constexpr std::string_view kNextJobIdKey = "next_job_id";          // value: 8 bytes BE
inline constexpr std::string_view kNextRolloutIdKey = "next_rollout_id";  // value: 8 bytes BE
inline constexpr std::string_view kIdempotencyPrefix = "idempotency/";    // + key; value: job id
inline constexpr std::string_view kModelSummaryPrefix = "model/";         // + hash; value: JSON
// + model hash, NUL, digest (MapDigestKey); value: the budget map's version (4 bytes BE).
inline constexpr std::string_view kMapDigestPrefix = "map_digest/";

// Longest model hash the store accepts, bytes.
inline constexpr size_t kMaxModelHashBytes = 256;
// Length of a budget map's digest (BudgetMapRecord::digest), lowercase hex digits.
inline constexpr size_t kMapDigestChars = 16;
// Longest rollout node id the store accepts, bytes (RolloutNodeRecord::node_id).
inline constexpr size_t kMaxNodeIdBytes = 256;

// jobs CF: job id, 8 bytes: the job record (everything but the inline data). The same key holds
// the job's inline data in the job_data CF (written once by CreateJob, only when non-empty) and
// marks an active (pending or running) job in the active_jobs CF. Also the prefix of that job's
// tasks and results.
std::string JobKey(JobId id);
std::optional<JobId> ParseJobKey(std::string_view key);
// Schema version 1 only: jobs CF, job id + 'd', 9 bytes: the inline data. Read by the migration
// to version 2, which moves it to the job_data CF.
std::string V1JobDataKey(JobId id);
std::optional<JobId> ParseV1JobDataKey(std::string_view key);

// finished_jobs CF: the time the job entered its final state (8 bytes, big-endian with the sign
// bit flipped so that negative times sort first), then the job id (8 bytes). One key per final
// job that is not purged yet, so PurgeFinishedJobs finds the oldest first without a scan.
std::string FinishedJobKey(TimeMs finished_at_ms, JobId id);
struct FinishedJobKeyParts {
  TimeMs finished_at_ms = 0;
  JobId id = kNoJob;
};
std::optional<FinishedJobKeyParts> ParseFinishedJobKey(std::string_view key);

// tasks CF: job, sample, layer; 16 bytes. Also the prefix of that task's results.
std::string TaskKeyBytes(const TaskKey& key);
std::optional<TaskKey> ParseTaskKey(std::string_view key);

// results CF: job, sample, layer, trial; 20 bytes.
std::string ResultKeyBytes(const TrialResult& result);
// The key's fields in a TrialResult whose kl is 0.
std::optional<TrialResult> ParseResultKey(std::string_view key);

// profiles and budget_maps CFs: model hash, a NUL byte, version (4 bytes). The NUL separator
// keeps hashes in byte-wise order and one hash's versions contiguous and ascending.
std::string VersionKey(std::string_view model_hash, uint32_t version);
// Every version of `model_hash` starts with this.
std::string VersionPrefix(std::string_view model_hash);
struct VersionKeyParts {
  std::string model_hash;
  uint32_t version = 0;
};
std::optional<VersionKeyParts> ParseVersionKey(std::string_view key);

// meta CF: kMapDigestPrefix, model hash, a NUL byte, digest: the digest index of budget maps.
// One key per (model hash, digest), written with the map it names; its value is that map's
// version (MapDigestValue).
std::string MapDigestKey(std::string_view model_hash, std::string_view digest);
struct MapDigestKeyParts {
  std::string model_hash;
  std::string digest;
};
// nullopt unless the key has the prefix, a valid model hash and a well-formed digest.
std::optional<MapDigestKeyParts> ParseMapDigestKey(std::string_view key);
std::string MapDigestValue(uint32_t version);
std::optional<uint32_t> ParseMapDigestValue(std::string_view value);

// rollouts CF: rollout id, 8 bytes; ids start at 1, so id 0 does not parse. The same encoding is
// the value of kNextRolloutIdKey and the prefix of the rollout's node records.
std::string RolloutKey(uint64_t id);
std::optional<uint64_t> ParseRolloutKey(std::string_view key);

// rollout_nodes CF: rollout id (8 bytes), then the node id's bytes (1..kMaxNodeIdBytes), so one
// rollout's nodes are contiguous and ordered by node id.
std::string RolloutNodeKey(uint64_t id, std::string_view node_id);
struct RolloutNodeKeyParts {
  uint64_t id = 0;
  std::string node_id;
};
std::optional<RolloutNodeKeyParts> ParseRolloutNodeKey(std::string_view key);

// InvalidArgument unless `hash` is 1..kMaxModelHashBytes bytes without a NUL byte.
[[nodiscard]] Status ValidateModelHash(std::string_view hash);

// True when `digest` is kMapDigestChars lowercase hex digits.
bool IsMapDigest(std::string_view digest);

// InvalidArgument unless `node_id` is 1..kMaxNodeIdBytes bytes; the message shows the id
// (ShowNodeId).
[[nodiscard]] Status ValidateNodeId(std::string_view node_id);

// A node id for messages: quoted when printable ASCII, else hex; at most 64 bytes shown.
std::string ShowNodeId(std::string_view node_id);

// For error messages: "column family 'tasks', key job=3 sample=0 layer=5"; a key that does not
// parse for its column family is shown in hex (at most 64 bytes, then "...").
std::string DescribeKey(std::string_view cf, std::string_view key);

}  // namespace ripplekv::store
