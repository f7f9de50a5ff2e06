#pragma once
// The worker's gRPC client (docs/API.md, WorkerService): Register, then one Connect stream on
// which it sends hello, heartbeats (with the prepared-cache keys), task refused, and per task
// task_accepted and task_done carrying the trial results (one write), and receives assignments
// and cancellations. Tasks run one at a time on
// the thread that called Run(), through TaskRunner; up to `prefetch` more wait queued, so the
// next task is already here when one ends (the worker registers capacity 1 + prefetch). When a
// stream ends it registers and connects again with exponential backoff: initial_backoff doubling to
// max_backoff, each delay drawn uniformly from [0, backoff] (full jitter, so a fleet that lost its
// scheduler does not come back in step). The backoff starts over only after a session that stayed
// up for stable_session: a scheduler that ends every session at once (overloaded, or refusing the
// stream) sees this worker back ever more slowly, not ten times a second. RequestDrain() (SIGTERM)
// finishes the task in progress, sends its results and `draining`, closes the stream and makes
// Run() return OK.
//
// Refusals end Run() with an error instead of a retry (the daemon exits non-zero, so a supervisor
// restarts it or pages): Register answered ALREADY_EXISTS (another live session holds the id) or
// FAILED_PRECONDITION (quarantined, or the model summary refused), or a `quarantined` message on
// the stream. Other Register errors (UNAVAILABLE, ...) are retried with backoff.
//
// Taking over an id: the first Register of the process sends `replace` as the options say; a
// Register after a stream that ended because the connection broke (UNAVAILABLE or
// DEADLINE_EXCEEDED) sends replace = true, since the session the scheduler may still think alive is
// this process's own; after a stream the scheduler ended itself (e.g. FAILED_PRECONDITION: another
// process took the id over with --replace) it sends false, so two processes never take one id
// back and forth.
//
// Implementation: a synchronous ClientReaderWriter per session; one reader thread, one heartbeat
// thread and the Run() thread share it, writes serialized by a mutex.

#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "method/profile.h"
#include "proto/client_channel.h"
#include "worker/service/task_runner.h"

namespace ripplekv::worker {

// The most tasks a worker queues beyond the one it runs (the scheduler caps capacity at 64).
inline constexpr int kMaxPrefetch = 63;

struct WorkerClientOptions {
  std::string scheduler_address;  // host:port of the scheduler
  // TLS and the bearer token (docs/SECURITY.md); keepalive_without_calls is always set.
  v1::ClientChannelOptions channel;
  std::string worker_id;  // stable worker name, 1..128 printable ASCII
  // Take the id over from a session the scheduler still thinks alive (RegisterRequest.replace),
  // on the first registration; see "Taking over an id" above.
  bool replace = false;
  // RegisterRequest.numerics (worker/service/worker_numerics.h); "" = not reported.
  std::string numerics;
  // Tasks held queued beyond the one running, 0..kMaxPrefetch: the scheduler's choice and the
  // network round trip overlap the running task instead of following it. Queued tasks are listed
  // in heartbeats (their leases stay renewed) and refused with DRAINING on a drain.
  int prefetch = 1;
  int64_t memory_limit_bytes = 0;  // advertised prefill cache limit, bytes; 0 = unbounded
  // The worker's memory accounting, reported at registration (docs/MEMORY.md); bytes, 0 = not
  // reported.
  struct Memory {
    int64_t limit_bytes = 0;           // the process's limit (--memory-limit-mb)
    int64_t weight_bytes = 0;          // WeightBytes of the loaded model
    int64_t thread_scratch_bytes = 0;  // all threads' scratch buffers
    int64_t process_bytes = 0;         // the process's fixed share (kProcessBytes)
  } memory;
  int tensor_parallel = 1;  // ranks holding the model's shards, reported at registration
  std::string device;       // "cpu", "cuda:0", reported at registration
  std::string host;         // this machine's name, reported at registration (for operators)
  std::chrono::milliseconds initial_backoff{100};  // first reconnect delay
  std::chrono::milliseconds max_backoff{5000};     // reconnect delay cap
  std::chrono::milliseconds stable_session{10000};  // a session up this long resets the backoff
  std::chrono::milliseconds register_deadline{10000};
  std::chrono::milliseconds job_data_deadline{60000};
  // Heartbeat interval when the scheduler gives none (it normally does, in RegisterResponse).
  std::chrono::milliseconds default_heartbeat{2000};
  // The process's device fault, "" when none (kernels::DeviceFault in the worker; unset: never).
  // Asked after each task: a fault fails that task with Unavailable (the scheduler leases it
  // elsewhere, the job goes on), refuses the queued tasks as draining, and ends Run with Aborted
  // naming the fault, since a faulted device stays unusable for the rest of the process.
  std::function<std::string()> device_fault;
};

// What the worker advertises about its model in Register.
// The model the worker loaded, as profiles describe it (ProfileModelOf()).
using WorkerModelInfo = method::ProfileModel;

struct WorkerClientStats {
  int64_t registrations = 0;  // successful Register calls
  int64_t sessions = 0;       // Connect streams opened
  int64_t tasks_done = 0;     // task_done sent without error
  int64_t tasks_failed = 0;   // task_done sent with error
  int64_t tasks_refused = 0;
  int64_t trials_sent = 0;
  // Wall time with a stream open, and the part of it spent handling tasks (checking, loading job
  // data, running, sending results); connected - busy is time waiting for work. Seconds.
  double connected_seconds = 0;
  double busy_seconds = 0;
  bool connected = false;  // a Connect stream is open now
  // Hand-out latency: from a task_done sent with nothing queued to the next assignment's arrival,
  // ms (the scheduler's storing of the results and choosing the next task, plus the network).
  // At most the last 65536 samples; percentiles over them, 0 when there are none. `handouts`
  // counts these waits: with prefetch, a task that was already queued is no wait.
  int64_t handouts = 0;
  double handout_p50_ms = 0;
  double handout_p99_ms = 0;
};

// Whether a Run() error is a device fault (WorkerClientOptions::device_fault): the process must
// exit, and a restarted worker should be placed on a healthy device.
bool IsDeviceFaultEnd(const Status& status);

// Whether a Run() error is the scheduler refusing this worker (AlreadyExists, FailedPrecondition),
// which no retry of the same process fixes.
bool IsSchedulerRefusal(const Status& status);

class WorkerClient {
 public:
  // `runner` must outlive the client.
  WorkerClient(const WorkerClientOptions& options, const WorkerModelInfo& model,
               TaskRunner* runner);
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  // Serves until RequestDrain() (returns OK once drained). Errors: InvalidArgument for options
  // that can never work (empty address or worker id); AlreadyExists when the scheduler refuses
  // the registration because another live session holds the id (the message names it and says
  // to use a distinct --id or --replace); FailedPrecondition when the scheduler refuses this
  // worker (quarantined, model summary refused: its message) or quarantines it while connected
  // ("quarantined until T: reason"). IsSchedulerRefusal() tells these two from the others.
  [[nodiscard]] Status Run();

  // Async-signal-unsafe; call from a normal thread (the daemon's signal-watching thread).
  // Thread-safe, idempotent.
  void RequestDrain();

  WorkerClientStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ripplekv::worker
