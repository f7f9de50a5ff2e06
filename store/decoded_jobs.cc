#include "store/decoded_jobs.h"

#include "store/codec.h"

namespace ripplekv::store {

StatusOr<Job> DecodedJobs::Decode(JobId id, std::string_view value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.first == value) return it->second.second;
  }
  StatusOr<Job> job = DecodeJob(id, value);  // outside the lock: the parse is the slow part
  if (!job.ok()) return job;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries && !entries_.contains(id)) entries_.clear();
  entries_.insert_or_assign(id, std::pair<std::string, Job>(std::string(value), *job));
  return job;
}

}  // namespace ripplekv::store
