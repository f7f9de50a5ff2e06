#include "scheduler/core/completion_committer.h"

#include <utility>

namespace ripplekv::scheduler {

CompletionCommitter::CompletionCommitter(store::Store* store)
    : store_(store), thread_([this] { Loop(); }) {}

CompletionCommitter::~CompletionCommitter() { Stop(); }

void CompletionCommitter::Submit(store::TaskKey key, std::vector<store::TrialResult> results,
                                 Worker worker, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back({.key = key,
                        .results = std::move(results),
                        .worker = std::move(worker),
                        .done = std::move(done)});
      if (queue_.size() == 1) cv_.notify_one();  // otherwise the thread is awake already
      return;
    }
  }
  done(absl::UnavailableError("the scheduler is shutting down; the task was not completed"));
}

void CompletionCommitter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CompletionCommitter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything written
    std::deque<Queued> group;
    group.swap(queue_);
    lock.unlock();
    std::vector<store::Store::Completion> completions;
    completions.reserve(group.size());
    for (const Queued& q : group) {
      completions.push_back({.key = q.key,
                             .results = q.results,
                             .worker_id = q.worker.id,
                             .worker_version = q.worker.version});
    }
    std::vector<StatusOr<store::ResultWriteOutcome>> outcomes = store_->CompleteTasks(completions);
    lock.lock();
    counts_.completions += group.size();
    ++counts_.writes;
    lock.unlock();
    for (size_t i = 0; i < group.size(); ++i) group[i].done(std::move(outcomes[i]));
    lock.lock();
  }
}

CompletionCommitter::Counts CompletionCommitter::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace ripplekv::scheduler
