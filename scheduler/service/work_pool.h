#pragma once
// A fixed pool of threads for the scheduler's store work (docs/DESIGN.md §3.3, "Bounded work"):
// gRPC's callback threads only hand requests and stream messages to it, so a slow fsync or a
// long aggregation never stalls the server's I/O. The queue is bounded for requests that can be
// refused (a full queue answers RESOURCE_EXHAUSTED); work a stream must not lose is always
// queued, and is bounded by the number of streams (each has at most one message in the pool).
//
// Thread-safety: every method may be called from any thread. The destructor runs what is queued,
// then joins the threads.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace ripplekv::scheduler::service {

class WorkPool {
 public:
  // `threads` >= 1; `max_queued` bounds the refusable work waiting at once.
  WorkPool(size_t threads, size_t max_queued);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `work`; false (not queued) when max_queued refusable items are waiting already.
  [[nodiscard]] bool TrySubmit(std::function<void()> work);
  // Queues `work` whatever the queue holds (a stream's next message).
  void Submit(std::function<void()> work);

  size_t max_queued() const { return max_queued_; }

 private:
  void Loop();

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Item {
    std::function<void()> work;
    bool refusable = false;  // queued by TrySubmit
  };
  std::deque<Item> queue_;  // guarded by mu_
  size_t refusable_ = 0;    // refusable items in queue_; guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::vector<std::thread> threads_;
};

// Answers a unary call with what `work` returns, run on `pool` (inline when `pool` is null). A full
// pool answers RESOURCE_EXHAUSTED at once. `work` may use the call's request and response: they
// live until the answer.
grpc::ServerUnaryReactor* AnswerOnPool(WorkPool* pool, grpc::CallbackServerContext* context,
                                       std::function<absl::Status()> work);

}  // namespace ripplekv::scheduler::service
