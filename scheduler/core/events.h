#pragma once
// The core's one outbox to the edge (docs/DESIGN.md §3): what the scheduler's managers decide
// that workers must be told is appended here as a typed event, in the order it was decided, and
// the server drains it (Scheduler::TakeEvents) after every worker message, timer tick,
// cancellation and written completion, and sends each event down the worker streams:
//   - Revocation: a lease taken back (expired, or its job cancelled) whose holder is registered;
//   - QuarantineNotice: a worker quarantined (its stream is told why, then ends);
//   - EndedJob: a job reached a final state (its model's workers drop its data).
// Beside the events it keeps the change counter that WatchJob streams wait on (WaitForChange):
// level-triggered (a watcher reads the jobs again after any change), not a queue.
//
// Thread-safety: Append, Take and NoteChange require the Scheduler's mutex (the outbox has no lock
// of its own); MaybeNonEmpty may be called without it; WaitForChange takes the lock it is given.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>
#include <variant>
#include <vector>

#include "scheduler/core/types.h"

namespace ripplekv::scheduler {

using Event = std::variant<Revocation, QuarantineNotice, EndedJob>;

class EventOutbox {
 public:
  // Requires the core's mutex.
  void Append(Event event) {
    events_.push_back(std::move(event));
    non_empty_.store(true, std::memory_order_release);
  }

  // Requires the core's mutex. Every event appended since the last call, oldest first.
  std::vector<Event> Take() {
    non_empty_.store(false, std::memory_order_relaxed);
    return std::exchange(events_, {});
  }

  // Without the lock: false only when nothing was appended since the last Take (an event
  // appended while this runs is taken by the next drain), so the drain after every worker
  // message skips the lock when there is nothing to send.
  bool MaybeNonEmpty() const { return non_empty_.load(std::memory_order_acquire); }

  // Requires the core's mutex: a job's state or progress changed.
  void NoteChange() {
    ++changes_;
    changed_.notify_all();
  }

  // Holding `lock` (the core's mutex): waits until the change counter differs from `seen`, or
  // `timeout_ms`; returns the counter.
  uint64_t WaitForChange(std::unique_lock<std::mutex>& lock, uint64_t seen, int64_t timeout_ms) {
    changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return changes_ != seen; });
    return changes_;
  }

 private:
  std::vector<Event> events_;
  std::atomic<bool> non_empty_{false};  // !events_.empty(), readable without the lock
  uint64_t changes_ = 0;
  std::condition_variable changed_;  // with the core's mutex; signalled by NoteChange
};

}  // namespace ripplekv::scheduler
