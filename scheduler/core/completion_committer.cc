#include "scheduler/core/completion_committer.h"

#include <utility>

namespace ripplekv::scheduler {

StatusOr<store::ResultWriteOutcome> CompletionCommitter::Commit(
    const store::TaskKey& key, std::span<const store::TrialResult> results) {
  Waiting self{.completion = {.key = key, .results = results}};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&self);
  while (!self.outcome) {
    if (writing_) {
      cv_.wait(lock);
      continue;
    }
    // This thread writes the group: everything queued now, itself included.
    writing_ = true;
    std::vector<Waiting*> group;
    group.swap(queue_);
    lock.unlock();
    std::vector<store::Store::Completion> completions;
    completions.reserve(group.size());
    for (const Waiting* w : group) completions.push_back(w->completion);
    std::vector<StatusOr<store::ResultWriteOutcome>> outcomes = store_->CompleteTasks(completions);
    lock.lock();
    for (size_t i = 0; i < group.size(); ++i) group[i]->outcome = std::move(outcomes[i]);
    counts_.completions += group.size();
    ++counts_.writes;
    writing_ = false;
    cv_.notify_all();
  }
  return *std::move(self.outcome);
}

CompletionCommitter::Counts CompletionCommitter::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace ripplekv::scheduler
