#pragma once
// The decoded form of recently read job records, keyed by the record's exact bytes: a read that
// finds the bytes it decoded last time returns a copy instead of parsing the JSON again (the
// scheduler reads a running job's record several times per task, and each completion write
// changes it; docs/STORE.md, "Reads").
// Correct whatever writes the record, since a changed record has other bytes. Bounded to
// kMaxEntries jobs (cleared when full). Thread-safe.

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/status.h"
#include "store/types.h"

namespace ripplekv::store {

class DecodedJobs {
 public:
  static constexpr size_t kMaxEntries = 256;

  // DecodeJob(id, value), from the cache when `value` is the bytes decoded last for `id`.
  [[nodiscard]] StatusOr<Job> Decode(JobId id, std::string_view value);

  // Notes that `value` (what EncodeJob gave for `job`) decodes to `job`, data_inline aside: called
  // when a record is written, so the next read needs no parse. Harmless should the write fail:
  // a read compares the bytes it finds.
  void Remember(const Job& job, std::string_view value);

 private:
  std::mutex mu_;
  std::unordered_map<JobId, std::pair<std::string, Job>> entries_;  // guarded by mu_
};

}  // namespace ripplekv::store
