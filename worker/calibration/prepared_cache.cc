#include "worker/calibration/prepared_cache.h"

namespace ripplekv::worker {

StatusOr<std::shared_ptr<const SampleCalibrator>> PreparedSampleCache::GetOrPrepare(
    const std::string& key, const Prepare& prepare) {
  std::unique_lock<std::mutex> lock(mu_);
  // Wait while another thread prepares the same key.
  cv_.wait(lock, [&] { return preparing_.find(key) == preparing_.end(); });
  if (auto it = entries_.find(key); it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    ++stats_.hits;
    return it->second.value;
  }
  ++stats_.misses;
  preparing_[key] = 1;
  lock.unlock();
  StatusOr<std::unique_ptr<SampleCalibrator>> made = prepare();
  lock.lock();
  preparing_.erase(key);
  cv_.notify_all();
  if (!made.ok()) return made.status();
  std::shared_ptr<const SampleCalibrator> value = std::move(made).value();
  const int64_t bytes = value->memory_bytes();
  if (bytes <= options_.max_bytes) {
    lru_.push_front(key);
    entries_[key] = Entry{value, bytes, lru_.begin()};
    stats_.bytes += bytes;
    EvictLocked();
  }
  return value;
}

void PreparedSampleCache::EvictLocked() {
  while (stats_.bytes > options_.max_bytes && !lru_.empty()) {
    const std::string victim = lru_.back();
    lru_.pop_back();
    auto it = entries_.find(victim);
    stats_.bytes -= it->second.bytes;
    entries_.erase(it);
    ++stats_.evictions;
  }
}

bool PreparedSampleCache::Contains(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(key) > 0;
}

void PreparedSampleCache::EraseWithPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.lower_bound(prefix);
       it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    stats_.bytes -= it->second.bytes;
    lru_.erase(it->second.lru);
    it = entries_.erase(it);
  }
}

std::vector<std::string> PreparedSampleCache::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {lru_.begin(), lru_.end()};
}

PreparedCacheStats PreparedSampleCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PreparedCacheStats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace ripplekv::worker
