#pragma once
// WatchJob streams (docs/API.md, "WatchJob"), event-driven and bounded: one thread for all of them
// waits on the scheduler's change notification (Scheduler::WaitForChange, and at most
// `poll_ms`), reads each watched job's progress once however many streams watch it, and offers it
// to every stream of that job. A stream writes the snapshot first, then state changes and
// (throttled) progress until the job is terminal. Writes never block the thread: a stream keeps
// at most one write in flight and replaces a progress event still waiting with the newer one, so a
// slow reader costs a few small messages, and one that does not take a write for `stall_ms` is
// dropped (RESOURCE_EXHAUSTED). At most `max_streams` streams exist at once; more are refused
// with RESOURCE_EXHAUSTED naming the limit.
//
// Thread-safety: every method may be called from any thread. Shutdown() ends every stream with
// UNAVAILABLE and must be called before the grpc::Server is shut down.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>

#include "ripplekv/v1/calibration.grpc.pb.h"
#include "scheduler/core/scheduler.h"

namespace ripplekv::scheduler::service {

struct JobWatchersOptions {
  int64_t poll_ms = 200;            // longest wait between two looks at the watched jobs, ms
  int64_t progress_min_ms = 1'000;  // at most one progress event per stream per this, ms
  int64_t stall_ms = 30'000;        // a stream whose client takes no write this long is dropped
  uint32_t max_streams = 1'024;     // streams open at once
};

class JobWatchers {
 public:
  // `scheduler` is not owned and must outlive this object.
  JobWatchers(Scheduler* scheduler, JobWatchersOptions options);
  ~JobWatchers();
  JobWatchers(const JobWatchers&) = delete;
  JobWatchers& operator=(const JobWatchers&) = delete;

  // A stream of job `job` that starts with `first` (its progress now), or one that finishes at
  // once with RESOURCE_EXHAUSTED (max_streams open) or UNAVAILABLE (shutting down).
  grpc::ServerWriteReactor<v1::JobEvent>* Watch(grpc::CallbackServerContext* context,
                                                store::JobId job, const JobProgress& first);

  // Ends every stream with UNAVAILABLE, refuses new ones, stops the thread; waits (bounded) for
  // the streams to finish. Idempotent.
  void Shutdown();

  size_t open_streams() const;

 private:
  class Stream;
  void Loop();
  void Remove(Stream* stream);

  Scheduler* const scheduler_;
  const JobWatchersOptions options_;

  // Recursive: a stream's OnDone (which removes it) may run inline from a Finish the loop calls.
  mutable std::recursive_mutex mu_;
  std::condition_variable_any cv_;  // streams_ shrank, or stopping_ was set
  std::set<Stream*> streams_;       // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace ripplekv::scheduler::service
