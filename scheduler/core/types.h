#pragma once
// The scheduler core's value types (docs/DESIGN.md §3): its options, what callers pass in
// (SubmitRequest, WorkerRegistration, LeaseId, PrefillKey) and what it answers (Assignment, the
// outcomes, WorkerInfo, JobProgress). Plain structs; the managers and the Scheduler façade share
// them, and the gRPC adapters convert them to and from messages.

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "method/profile.h"
#include "store/types.h"
#include "telemetry/metrics.h"

namespace ripplekv::scheduler {

// How the scheduler treats faulty workers and verifies results (see the class comment and
// docs/SCHEDULER.md, "Faulty workers").
struct FaultOptions {
  uint32_t quarantine_failures = 3;        // failed attempts charged to a worker inside the
                                           // window that quarantine it, >= 1
  int64_t quarantine_window_ms = 600'000;  // the window, ms
  int64_t quarantine_ms = 1'800'000;       // how long a quarantine lasts, ms
  int64_t exclusion_grace_ms = 60'000;     // a task a worker failed goes back to that worker only
                                           // this long after, and only with no other eligible
                                           // worker registered, ms
  int64_t job_wait_ms = 3'600'000;         // a job stalled by faults this long fails, ms; 0: never
  int64_t live_session_ms = 10'000;        // a registration of an id heard from within this is
                                           // refused unless it replaces, ms
  double default_verify_fraction = 0.05;   // JobSpec::verify_fraction of a submit that gives none
  int64_t verify_wait_ms = 10'000;         // how long a first run waits for a second eligible
                                           // worker before it completes unverified, ms
  uint64_t verify_key = 0;                 // key of the verification sample; 0: random per start
};

struct SchedulerOptions {
  int64_t lease_duration_ms = 120'000;     // a lease's deadline is now + this, ms, capped by
                                           // the task deadline; heartbeats listing it move it
  int64_t heartbeat_timeout_ms = 30'000;   // a worker silent for longer is dropped, ms
  uint64_t max_tasks_per_job = 1u << 20;   // most (sample, layer) tasks one job may plan
  uint64_t max_trials_per_job = 1u << 24;  // most tasks x trials one job may plan
  // The longest one lease of a task may last, however often its holder heartbeats, ms; 0: derived
  // from the job's size and the model (DeriveTaskDeadlineMs).
  int64_t task_deadline_ms = 0;
  uint32_t max_attempts = 4;     // failed attempts of one task that fail its job
  bool prefill_affinity = true;  // false: always hand out the lowest (sample, layer)
                                 // (the baseline that docs/SCHEDULER.md measures)
  FaultOptions faults;
  // The inline calibration data that pending jobs (submitted, no task leased yet) hold together,
  // bytes: a submit that would pass it is ResourceExhausted. 0: no cap. With no worker to start
  // them, pending jobs would otherwise take the store's memory and disk without bound.
  uint64_t max_pending_inline_bytes = 1024ull << 20;
  // A job still pending this long after its submission fails (ExpireLeases), ms, and its data no
  // longer counts against max_pending_inline_bytes (retention deletes it later). 0: never.
  int64_t pending_job_ttl_ms = 7 * 24 * 3600 * 1000LL;
  // Where the scheduler's counters and latency histogram go (docs/OPERATIONS.md, "Metrics"):
  // tasks leased, completed and retried, lease expiries, workers lost, jobs finished by state,
  // result latency. Must outlive the scheduler; null: a registry of its own, never scraped.
  telemetry::MetricsRegistry* metrics = nullptr;
};

// Milliseconds since the Unix epoch; injected so tests drive time.
using Clock = std::function<int64_t()>;

struct SubmitRequest {
  store::JobSpec spec;
  // The model's layer count L. 0: take it from a registered worker holding spec.model_hash
  // (InvalidArgument naming "model_n_layers" when none has registered).
  int64_t model_n_layers = 0;
  // The submitter's name of the model (ModelRef.name); empty: not given. Until the hash's summary
  // is recorded, only workers reporting this name (when given) run the job, and the first job's
  // name and layer count choose the summary recorded.
  std::string model_name;
  // The fraction of tasks verified (spec.verify_fraction is ignored); unset: the scheduler's
  // FaultOptions::default_verify_fraction. InvalidArgument naming "verify" outside [0, 1].
  std::optional<double> verify_fraction;
};

struct WorkerRegistration {
  std::string worker_id;       // 1..256 bytes, unique per live worker
  method::ProfileModel model;  // the model the worker loaded; model.hash identifies it
  uint32_t capacity = 1;       // tasks it runs at once (leases it may hold), >= 1
  std::string version;         // what it reported ("ripplekv 0.1.0 (REVISION)"); may be empty
  std::string host;            // where it runs, for operators; may be empty
  std::string device;          // "cpu", "cuda:0"; may be empty
  // "<device class>/<build>": equal strings give bit-identical results (worker.proto); may be
  // empty (unknown: compared within the loosest tolerance).
  std::string numerics;
  std::string instance;  // random per process start; may be empty
  bool replace = false;  // take the id over from a session that still looks alive
};

// A prepared sample a worker holds in its PreparedSampleCache.
struct PrefillKey {
  store::JobId job = store::kNoJob;
  uint32_t sample = 0;
  friend auto operator<=>(const PrefillKey&, const PrefillKey&) = default;
};

// One lease of a task: the attempt number is the store's Task::attempts when it was leased.
struct LeaseId {
  store::TaskKey key;
  uint32_t attempt = 0;
  friend auto operator<=>(const LeaseId&, const LeaseId&) = default;
};

struct Assignment {
  store::TaskKey key;
  store::TimeMs lease_deadline_ms = 0;
  store::TimeMs task_deadline_ms = 0;  // heartbeats never move the lease past this
  std::string model_hash;              // the job's spec.model_hash
  // The job's params, as stored (defaults resolved at submit), except `samples`: the samples
  // planned so far (Job::samples_planned), which the worker reads its data with.
  method::CalibrationParams params;
  uint32_t trials = 0;        // the job's params.trials: the worker runs trials 0..trials-1
  uint32_t attempts = 0;      // times the task has been leased, this one included
  bool prefill_held = false;  // the worker said it holds this sample's prefill
};

struct TaskResultsOutcome {
  uint64_t stored = 0;      // results written now
  uint64_t duplicates = 0;  // results that were stored already (a retried write)
  uint64_t conflicts = 0;   // duplicates whose KL differed bitwise: a determinism bug upstream
  bool task_completed = false;
  bool job_succeeded = false;    // this call finished the job
  uint32_t profile_version = 0;  // the version written when job_succeeded
  // This call completed a round of an until_stable job that was not stable yet: the job was
  // extended by the next round (its tasks are pending now) instead of finished.
  bool job_extended = false;
  uint32_t samples_planned = 0;  // the job's samples planned after the call, when job_extended
};

// What SubmitTaskResults did with checked results.
enum class Submitted {
  kCommitting,            // queued for the store write; `done` runs once it lands
  kAwaitingVerification,  // held until a distinct worker's run of the task agrees (or the
                          // verify wait passes); `done` is never called; the slot is free
};

// An event (events.h): a quarantine the adapter tells its worker about.
struct QuarantineNotice {
  std::string worker_id;
  std::string reason;  // one line
  store::TimeMs until_ms = 0;
};

// A worker as ListWorkers shows it: a registered one, or an id known for its quarantine.
struct WorkerInfo {
  std::string worker_id;
  bool connected = false;  // registered now
  std::string model_hash;  // when connected
  std::string version;
  std::string device;
  std::string numerics;
  uint32_t capacity = 0;
  uint32_t leases = 0;
  store::TimeMs last_seen_ms = 0;
  uint32_t recent_failures = 0;  // charged inside the quarantine window
  bool quarantined = false;
  std::string quarantine_reason;
  store::TimeMs quarantined_until_ms = 0;
  uint64_t tasks_completed = 0;  // results delivered since the scheduler started
};

struct WorkerPage {
  std::vector<WorkerInfo> workers;  // by worker id
  std::string next_page_token;      // empty on the last page
};

// An event (events.h): a lease the adapter revokes on the worker (its job was cancelled, or its
// deadline passed).
struct Revocation {
  std::string worker_id;
  LeaseId lease;
  std::string reason;  // one line, for the worker's log
};

struct ExpireOutcome {
  std::vector<std::string> dropped_workers;  // silent past heartbeat_timeout_ms
  std::vector<store::TaskKey> released;      // leases returned to pending, canonical order
  std::vector<uint32_t> profiles_written;    // versions of jobs finished by this tick
  // Until_stable jobs left complete at the end of a round that this tick extended by the next
  // round (their new tasks are pending).
  std::vector<store::JobId> jobs_extended;
  // Jobs complete but not yet profiled that this tick could not finish (the model's summary is
  // unknown, or the store failed), one line each; retried on the next tick.
  std::vector<std::string> finish_errors;
};

// An event (events.h): a job that reached a final state through the scheduler.
struct EndedJob {
  store::JobId id = store::kNoJob;
  std::string model_hash;
  store::JobState state = store::JobState::kPending;
};

struct SubmitOutcome {
  store::Job job;
  // true: this call created the job; false: the idempotency key named an existing job with an
  // equal spec, which `job` is. Decided by the store write itself, so of concurrent submits with
  // one key exactly one sees true.
  bool created = false;
};

struct CancelOutcome {
  store::Job job;  // the job after the call (state cancelled); spec.data_inline left empty
  bool already_cancelled = false;  // the job was cancelled before: nothing was changed
};

// Paging of the listings (AIP-158). A page token is the decimal offset of the page's first item

struct JobProgress {
  store::Job job;  // spec.data_inline left empty
  uint64_t tasks_leased = 0;
  // Observed completion rate in this process (tasks per second) and the remaining time it
  // implies; both -1 until two completions have been observed.
  double tasks_per_second = -1;
  int64_t eta_ms = -1;
  // Why the job does not progress now (no healthy worker of its model registered, a
  // verification waiting for a distinct worker, ...), one line; empty while it progresses.
  std::string waiting_reason;
  uint64_t tasks_verified = 0;  // tasks two distinct workers agreed on (in this process)
  uint32_t disagreements = 0;   // verifications in which a worker was outvoted
};

// "task (job J, sample S, layer L)", for messages.
inline std::string TaskName(const store::TaskKey& key) {
  return absl::StrCat("task (job ", key.job, ", sample ", key.sample, ", layer ", key.layer, ")");
}

}  // namespace ripplekv::scheduler
