// RocksStore: id counters after recovery (docs/STORE.md, "Corruption"). An id once handed out is
// never handed out again, even when the counter that allocates it was lost with a dropped tail
// of the write-ahead log while the record it named survived, or when a loss was accepted
// (StoreOptions::accept_wal_loss) and the dropped records held ids a client was already given.

#include <algorithm>

#include "base/strings.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

std::string EncodeBe64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xFF);
  return out;
}

uint64_t DecodeBe64Prefix(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < s.size(); ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

uint64_t Lookup(const std::map<std::string, uint64_t>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? 0 : it->second;
}

}  // namespace

Status RocksStore::RaiseIdCounters(const DroppedWrites* dropped) {
  std::lock_guard<std::mutex> lock(write_mu_);
  rocksdb::WriteBatch batch;
  // One counter: `key` in meta, the ids being the 8-byte big-endian keys of `cf`; `floor` the
  // smallest next id the dropped records allow (0: none).
  auto raise = [&](Cf cf, std::string_view key, std::string_view what, uint64_t floor) -> Status {
    ASSIGN_OR_RETURN(std::optional<std::string> stored, Get(kMeta, key));
    uint64_t counter = 1;
    if (stored) {
      if (stored->size() != 8) return Damaged(kMeta, key, absl::DataLossError("not 8 bytes"));
      counter = DecodeBe64Prefix(*stored);
    }
    uint64_t next = std::max(counter, floor);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[cf]));
    it->SeekToLast();
    if (it->Valid() && it->key().size() >= 8) {
      const uint64_t last = DecodeBe64Prefix(std::string_view(it->key().data(), 8));
      if (last != UINT64_MAX) next = std::max(next, last + 1);
    }
    RETURN_IF_ERROR(FromRocks(it->status(), Cat("seeking in column family '", CfName(cf), "'")));
    if (next == counter) return absl::OkStatus();
    recovery_notes_.push_back(Cat("the next ", what, " id was raised from ", counter, " to ", next,
                                  ", above every id in the data",
                                  floor > counter ? " and in the dropped log records" : "",
                                  ": no id is handed out twice"));
    return PutRaw(&batch, kMeta, key, EncodeBe64(next));
  };
  uint64_t job_floor = 0;
  uint64_t rollout_floor = 0;
  if (dropped != nullptr) {
    job_floor = std::max(dropped->max_next_job_id, Lookup(dropped->max_id_prefix, kJobsCf) + 1);
    rollout_floor =
        std::max(dropped->max_next_rollout_id, Lookup(dropped->max_id_prefix, kRolloutsCf) + 1);
  }
  RETURN_IF_ERROR(raise(kJobs, kNextJobIdKey, "job", job_floor));
  RETURN_IF_ERROR(raise(kRollouts, kNextRolloutIdKey, "rollout", rollout_floor));
  if (batch.Count() > 0) RETURN_IF_ERROR(Write(&batch));
  return absl::OkStatus();
}

}  // namespace ripplekv::store
