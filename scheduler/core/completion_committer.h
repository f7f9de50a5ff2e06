#pragma once
// Group commit of task completions (docs/DESIGN.md §3.3, "Bounded work"): a completion that
// arrives while another write is in flight waits and is written with every other one that arrived
// meanwhile, in one Store::CompleteTasks call (one WriteBatch, one fsync). N workers finishing at
// once cost one fsync instead of N, and a lone completion is written at once.
//
// Thread-safety: Commit may be called from any thread; the store must outlive this object.

#include <condition_variable>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "kernels/base/status.h"
#include "store/store.h"

namespace ripplekv::scheduler {

class CompletionCommitter {
 public:
  explicit CompletionCommitter(store::Store* store) : store_(store) {}

  // Store::CompleteTask(key, results), written together with the completions of other threads.
  [[nodiscard]] StatusOr<store::ResultWriteOutcome> Commit(
      const store::TaskKey& key, std::span<const store::TrialResult> results);

  // Completions written and Store::CompleteTasks calls made so far (their ratio is the mean
  // group size).
  struct Counts {
    uint64_t completions = 0;
    uint64_t writes = 0;
  };
  Counts counts() const;

 private:
  struct Waiting {
    store::Store::Completion completion;
    std::optional<StatusOr<store::ResultWriteOutcome>> outcome;
  };

  store::Store* const store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Waiting*> queue_;  // guarded by mu_: not yet taken by a writer
  bool writing_ = false;         // guarded by mu_: a thread is writing a group
  Counts counts_;                // guarded by mu_
};

}  // namespace ripplekv::scheduler
