#pragma once
// A bounded cache of prepared calibration samples (clean prefill + probe pass), so a worker that
// is given several layers of the same sample pays for the prefill once. Least recently used
// entries are evicted when the total exceeds the byte budget; an entry larger than the whole
// budget is returned to its caller but not kept. The scheduler prefers workers that hold a
// sample's prefill already (Keys() is what a worker advertises).
//
// Thread-safe: any number of threads may call GetOrPrepare concurrently; a sample being prepared
// by one thread is prepared once, other callers for the same key wait for it.

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <vector>

#include "base/status.h"
#include "worker/calibration/sample_calibrator.h"

namespace ripplekv::worker {

struct PreparedCacheOptions {
  int64_t max_bytes = int64_t{1} << 30;  // memory budget for prepared samples, bytes
};

struct PreparedCacheStats {
  int64_t hits = 0;       // GetOrPrepare served from the cache
  int64_t misses = 0;     // GetOrPrepare ran `prepare`
  int64_t evictions = 0;  // entries dropped for the byte budget
  int64_t bytes = 0;      // bytes held now
  int64_t entries = 0;    // entries held now
};

class PreparedSampleCache {
 public:
  using Prepare = std::function<StatusOr<std::unique_ptr<SampleCalibrator>>()>;

  explicit PreparedSampleCache(const PreparedCacheOptions& options) : options_(options) {}

  // The prepared sample for `key` (e.g. "job/sample"), from the cache or made by `prepare`.
  // A failed prepare is returned and not cached.
  StatusOr<std::shared_ptr<const SampleCalibrator>> GetOrPrepare(const std::string& key,
                                                                 const Prepare& prepare);

  bool Contains(const std::string& key) const;
  // Drops every entry whose key starts with `prefix` (e.g. a finished or cancelled job).
  void EraseWithPrefix(const std::string& prefix);
  std::vector<std::string> Keys() const;  // most recently used first
  PreparedCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const SampleCalibrator> value;
    int64_t bytes = 0;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  void EvictLocked();

  const PreparedCacheOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // guarded by mu_
  std::list<std::string> lru_;            // guarded by mu_; front = most recent
  std::map<std::string, int> preparing_;  // guarded by mu_: keys being prepared, waiters count
  PreparedCacheStats stats_;              // guarded by mu_
};

}  // namespace ripplekv::worker
