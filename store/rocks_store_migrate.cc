// RocksStore: in-place migration of older schema versions (docs/STORE.md, "Schema versions").

#include <set>
#include <string>

#include "base/strings.h"
#include "store/codec.h"
#include "store/keys.h"
#include "store/legacy/decode_v3_rollouts.h"
#include "store/rocks_store.h"

namespace ripplekv::store {

// Version 1 kept a job's inline data in the jobs column family under job id + 'd' and had no
// job indexes. Version 2 moves the data to job_data (so that listing jobs never reads it) and
// adds active_jobs and finished_jobs. Everything, the new schema version included, is one
// batch: a crash leaves the database at version 1 (migrated again on the next open) or at
// version 2, never in between. The batch holds every job's inline data once, so the migration
// needs about that much memory.
Status RocksStore::MigrateFromV1() {
  rocksdb::WriteBatch batch;
  std::optional<Job> last;  // the record before a data key in the scan is that job's
  RETURN_IF_ERROR(Scan(kJobs, "", [&](std::string_view key, std::string_view value) {
    if (std::optional<JobId> id = ParseV1JobDataKey(key)) {
      // Checked before it moves: a damaged record must not become a damaged record elsewhere.
      StatusOr<std::string> data = DecodeJobData(value);
      if (!data.ok()) return Damaged(kJobs, key, data.status());
      RETURN_IF_ERROR(PutRaw(&batch, kJobData, JobKey(*id), value));
      if (last && last->id == *id) {  // the record now says how large its data is
        last->data_inline_bytes = data->size();
        RETURN_IF_ERROR(PutJob(&batch, *last));
      }
      return Delete(&batch, kJobs, key);
    }
    std::optional<JobId> id = ParseJobKey(key);
    if (!id) return Damaged(kJobs, key, absl::DataLossError("malformed key"));
    StatusOr<Job> job = DecodeJob(*id, value);
    if (!job.ok()) return Damaged(kJobs, key, job.status());
    last = *job;
    if (IsTerminal(job->state)) {
      // Version 1 did not record when a job became final; its last update is the best bound.
      return PutRaw(&batch, kFinishedJobs, FinishedJobKey(job->updated_at_ms, *id), "");
    }
    return PutRaw(&batch, kActiveJobs, JobKey(*id), "");
  }));
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, kSchemaVersionKey, kSchemaVersion2));
  // Always synced: the old layout is gone once this returns.
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  return FromRocks(db_->Write(write_options, &batch), "migrating schema version 1 to 2");
}

// Version 2 stored budget maps without a digest and allowed the same map twice. Version 3
// re-encodes every map with its digest and writes the digest index (meta, MapDigestKey); the
// rollouts and rollout_nodes column families were created empty by Open. One batch, synced, as
// above. A map stored more than once under version 2 keeps every sequence number (GetBudgetMap
// still finds each); the index names the first, which is what a PutBudgetMap of those bytes now
// returns.
Status RocksStore::MigrateFromV2() {
  rocksdb::WriteBatch batch;
  std::set<std::string> indexed;  // digest index keys in the batch
  RETURN_IF_ERROR(Scan(kBudgetMaps, "", [&](std::string_view key, std::string_view value) {
    std::optional<VersionKeyParts> parts = ParseVersionKey(key);
    if (!parts) return Damaged(kBudgetMaps, key, absl::DataLossError("malformed key"));
    StatusOr<BudgetMapRecord> map = DecodeV2BudgetMap(*parts, value);
    if (!map.ok()) return Damaged(kBudgetMaps, key, map.status());
    ASSIGN_OR_RETURN(std::string encoded, EncodeBudgetMap(*map));
    RETURN_IF_ERROR(PutRaw(&batch, kBudgetMaps, key, encoded));
    // Keys come in (hash, version) order: an index entry already made names an earlier
    // version with the same digest, and stays.
    std::string index = MapDigestKey(map->model_hash, map->digest);
    if (!indexed.insert(index).second) return absl::OkStatus();
    return PutRaw(&batch, kMeta, index, MapDigestValue(map->version));
  }));
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, kSchemaVersionKey, kSchemaVersion3));
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  return FromRocks(db_->Write(write_options, &batch), "migrating schema version 2 to 3");
}

// Version 3 stored each rollout and rollout node value as the wire bytes of the API's message
// (ripplekv.v1.Rollout, RolloutNode). Version 4 re-encodes every one as the store's own value
// (codec.h), under the same key. A value that does not decode, or decodes to a rollout the codec
// refuses, is DataLoss naming its key, and nothing is written. One batch, synced, as above; it
// holds every rollout node once (about 200 bytes each).
Status RocksStore::MigrateFromV3() {
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(Scan(kRollouts, "", [&](std::string_view key, std::string_view value) {
    std::optional<uint64_t> id = ParseRolloutKey(key);
    if (!id) return Damaged(kRollouts, key, absl::DataLossError("malformed key"));
    StatusOr<RolloutRecord> rollout = DecodeV3Rollout(*id, value);
    if (!rollout.ok()) return Damaged(kRollouts, key, rollout.status());
    StatusOr<std::string> encoded = EncodeRollout(*rollout);
    if (!encoded.ok())
      return Damaged(kRollouts, key, absl::DataLossError(encoded.status().message()));
    return PutRaw(&batch, kRollouts, key, *encoded);
  }));
  RETURN_IF_ERROR(Scan(kRolloutNodes, "", [&](std::string_view key, std::string_view value) {
    std::optional<RolloutNodeKeyParts> parts = ParseRolloutNodeKey(key);
    if (!parts) return Damaged(kRolloutNodes, key, absl::DataLossError("malformed key"));
    StatusOr<RolloutNodeRecord> node = DecodeV3RolloutNode(parts->node_id, value);
    if (!node.ok()) return Damaged(kRolloutNodes, key, node.status());
    StatusOr<std::string> encoded = EncodeRolloutNode(*node);
    if (!encoded.ok()) {
      return Damaged(kRolloutNodes, key, absl::DataLossError(encoded.status().message()));
    }
    return PutRaw(&batch, kRolloutNodes, key, *encoded);
  }));
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, kSchemaVersionKey, kSchemaVersion));
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  return FromRocks(db_->Write(write_options, &batch), "migrating schema version 3 to 4");
}

}  // namespace ripplekv::store
