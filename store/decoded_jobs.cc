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
  if (job.ok()) Remember(*job, value);
  return job;
}

void DecodedJobs::Remember(const Job& job, std::string_view value) {
  Job decoded = job;
  // DecodeJob leaves the data empty; a job being created has it: release it (clear() would keep
  // its memory, a copy of the inline data per cached job).
  std::string().swap(decoded.spec.data_inline);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries && !entries_.contains(job.id)) entries_.clear();
  entries_.insert_or_assign(job.id,
                            std::pair<std::string, Job>(std::string(value), std::move(decoded)));
}

}  // namespace ripplekv::store
