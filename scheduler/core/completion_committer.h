#pragma once
// Group commit of task completions (docs/DESIGN.md §3.3, "Bounded work"). Completions are queued
// without waiting; one thread writes everything queued in one Store::CompleteTasks call (one
// WriteBatch, one fsync) and then runs each completion's callback, in submission order. While a
// write is in flight the next group gathers, so N completions arriving together cost one fsync,
// and a lone completion is written at once. The threads that submit never wait for the disk.
//
// Thread-safety: every method may be called from any thread. Callbacks run on the committer's
// thread, one at a time, and may call Submit. The store must outlive this object.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "store/store.h"

namespace ripplekv::scheduler {

class CompletionCommitter {
 public:
  using Done = std::function<void(StatusOr<store::ResultWriteOutcome>)>;

  explicit CompletionCommitter(store::Store* store);
  ~CompletionCommitter();  // Stop()
  CompletionCommitter(const CompletionCommitter&) = delete;
  CompletionCommitter& operator=(const CompletionCommitter&) = delete;

  // The worker a completion is recorded with (store::Task::completed_by, completed_by_version).
  struct Worker {
    std::string id;
    std::string version;
  };

  // Queues Store::CompleteTask(key, results) by `worker`; `done` gets its outcome once the group
  // holding it is written. After Stop(), `done` runs at once, on this thread, with Unavailable.
  void Submit(store::TaskKey key, std::vector<store::TrialResult> results, Worker worker,
              Done done);

  // Writes what is queued, runs its callbacks, then ends the thread. Idempotent.
  void Stop();

  // Completions written and Store::CompleteTasks calls made so far (their ratio is the mean
  // group size).
  struct Counts {
    uint64_t completions = 0;
    uint64_t writes = 0;
  };
  Counts counts() const;

 private:
  struct Queued {
    store::TaskKey key;
    std::vector<store::TrialResult> results;
    Worker worker;
    Done done;
  };
  void Loop();

  store::Store* const store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // guarded by mu_: not yet taken by the thread
  bool stopping_ = false;     // guarded by mu_
  Counts counts_;             // guarded by mu_
  std::thread thread_;        // last: started once the rest exists
};

}  // namespace ripplekv::scheduler
