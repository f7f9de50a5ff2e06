// RocksStore: rollouts and their node records (see store/store.h for the contracts), values in
// the store's own encoding (store/codec.h; docs/STORE.md).

#include <algorithm>
#include <vector>

#include "base/strings.h"
#include "store/codec.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {

StatusOr<RolloutRecord> RocksStore::ReadRollout(uint64_t id,
                                                const rocksdb::Snapshot* snapshot) const {
  const std::string key = RolloutKey(id);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kRollouts, key, snapshot));
  if (!value) return absl::NotFoundError(Cat("rollout ", id, " not found"));
  if (value->empty()) return Damaged(kRollouts, key, absl::DataLossError("value is empty"));
  StatusOr<RolloutRecord> rollout = DecodeRollout(id, *value);
  if (!rollout.ok()) return Damaged(kRollouts, key, rollout.status());
  return rollout;
}

StatusOr<RolloutRecord> RocksStore::CreateRollout(const RolloutRecord& rollout) {
  ASSIGN_OR_RETURN(std::string value, EncodeRollout(rollout));
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(std::optional<std::string> next, Get(kMeta, kNextRolloutIdKey));
  uint64_t id = 1;
  if (next) {
    std::optional<uint64_t> parsed = ParseRolloutKey(*next);
    if (!parsed) return Damaged(kMeta, kNextRolloutIdKey, absl::DataLossError("not a rollout id"));
    id = *parsed;
  }
  if (id == UINT64_MAX) return absl::ResourceExhaustedError("no rollout id left");
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutRaw(&batch, kRollouts, RolloutKey(id), value));
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, kNextRolloutIdKey, RolloutKey(id + 1)));
  RETURN_IF_ERROR(Write(&batch));
  RolloutRecord created = rollout;
  created.id = id;
  return created;
}

Status RocksStore::WriteRollout(uint64_t id, const RolloutRecord* rollout,
                                std::span<const RolloutNodeRecord> nodes, bool sync) {
  std::optional<std::string> value;
  if (rollout != nullptr) {
    StatusOr<std::string> encoded = EncodeRollout(*rollout);
    if (!encoded.ok()) {
      return absl::InvalidArgumentError(
          Cat("rollout ", id, ": ", std::string(encoded.status().message())));
    }
    value = *std::move(encoded);
  }
  std::vector<std::string_view> node_ids;
  std::vector<std::string> node_values;
  node_ids.reserve(nodes.size());
  node_values.reserve(nodes.size());
  for (const RolloutNodeRecord& node : nodes) {
    const Status valid = ValidateNodeId(node.node_id);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(Cat("rollout ", id, ": ", std::string(valid.message())));
    }
    StatusOr<std::string> encoded = EncodeRolloutNode(node);
    if (!encoded.ok()) {
      return absl::InvalidArgumentError(Cat("rollout ", id, ": node ", ShowNodeId(node.node_id),
                                            ": ", std::string(encoded.status().message())));
    }
    node_ids.push_back(node.node_id);
    node_values.push_back(*std::move(encoded));
  }
  std::sort(node_ids.begin(), node_ids.end());
  if (auto dup = std::adjacent_find(node_ids.begin(), node_ids.end()); dup != node_ids.end()) {
    return absl::InvalidArgumentError(
        Cat("rollout ", id, ": node ", ShowNodeId(*dup), " is listed twice"));
  }

  std::lock_guard<std::mutex> lock(write_mu_);
  RETURN_IF_ERROR(ReadRollout(id).status());
  rocksdb::WriteBatch batch;
  if (value) RETURN_IF_ERROR(PutRaw(&batch, kRollouts, RolloutKey(id), *value));
  for (size_t i = 0; i < nodes.size(); ++i) {
    RETURN_IF_ERROR(
        PutRaw(&batch, kRolloutNodes, RolloutNodeKey(id, nodes[i].node_id), node_values[i]));
  }
  if (batch.Count() == 0) return absl::OkStatus();
  if (sync) return Write(&batch);  // synced as StoreOptions::sync_writes says
  // Never synced: a process crash keeps it (the log is in the OS), a power cut may not.
  rocksdb::WriteOptions write_options;
  write_options.sync = false;
  return ObservedWrite(write_options, &batch, "writing an unsynced rollout batch");
}

StatusOr<RolloutRecord> RocksStore::GetRollout(uint64_t id) const { return ReadRollout(id); }

StatusOr<std::vector<RolloutRecord>> RocksStore::ListRollouts() const {
  std::vector<RolloutRecord> out;
  RETURN_IF_ERROR(Scan(kRollouts, "", [&](std::string_view key, std::string_view value) {
    std::optional<uint64_t> id = ParseRolloutKey(key);
    if (!id) return Damaged(kRollouts, key, absl::DataLossError("malformed key"));
    if (value.empty()) return Damaged(kRollouts, key, absl::DataLossError("value is empty"));
    StatusOr<RolloutRecord> rollout = DecodeRollout(*id, value);
    if (!rollout.ok()) return Damaged(kRollouts, key, rollout.status());
    out.push_back(*std::move(rollout));
    return absl::OkStatus();
  }));
  return out;
}

StatusOr<std::vector<RolloutNodeRecord>> RocksStore::ListRolloutNodes(uint64_t id) const {
  SnapshotHolder snapshot(db_.get());
  RETURN_IF_ERROR(ReadRollout(id, snapshot.get()).status());
  std::vector<RolloutNodeRecord> out;
  RETURN_IF_ERROR(Scan(
      kRolloutNodes, RolloutKey(id),
      [&](std::string_view key, std::string_view value) {
        std::optional<RolloutNodeKeyParts> parts = ParseRolloutNodeKey(key);
        if (!parts) return Damaged(kRolloutNodes, key, absl::DataLossError("malformed key"));
        if (value.empty()) {
          return Damaged(kRolloutNodes, key, absl::DataLossError("value is empty"));
        }
        StatusOr<RolloutNodeRecord> node = DecodeRolloutNode(parts->node_id, value);
        if (!node.ok()) return Damaged(kRolloutNodes, key, node.status());
        out.push_back(*std::move(node));
        return absl::OkStatus();
      },
      /*values=*/true, snapshot.get()));
  return out;
}

}  // namespace ripplekv::store
