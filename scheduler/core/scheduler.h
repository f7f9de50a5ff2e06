#pragma once
// The scheduler core (docs/DESIGN.md §3): plans calibration jobs into (sample, layer) tasks, leases
// them to registered workers (jobs by priority then age, never across model hashes, preferring a
// worker that already holds the sample's prefill), expires leases of silent workers, cancels,
// and when a job's last task is done aggregates its results in canonical order into a new
// profile version. No network: the gRPC adapters in scheduler/service/ call this class.
//
// State: everything durable lives in the store (store/store.h), which this class only uses
// through its interface; the worker registry, prefill affinity and rate observations are in
// memory and rebuilt as workers register again. So is an index of each active job's pending
// tasks, loaded from the store on first use and kept in step with every transition this class
// makes, so a dispatch costs O(log tasks) rather than a scan of the job's tasks. Every task
// transition must therefore go through this class (the store is not shared with other writers).
// Constructing a Scheduler over a reopened store continues every unfinished job (the store returned
// leased tasks to pending on open); a job whose tasks were all done before a crash but has no
// profile yet is finished by the next ExpireLeases tick once the model's summary is known (the
// profile needs the model summary that workers report).
//
// Fencing (docs/DESIGN.md §3.3): a lease is (task, attempt). Results, completions, refusals and
// failures are accepted only for the lease the worker holds now, with its attempt number; anything
// else is FailedPrecondition and changes nothing. Results are checked where they arrive with the
// aggregation's rule (method::CheckTrialKl) and must be exactly the task's trials: otherwise the
// attempt fails and its lease is released.
//
// Liveness: a heartbeat renews only the leases the worker lists; no lease outlives its task
// deadline (SchedulerOptions::task_deadline_ms, or derived from the job's size), however often the
// worker heartbeats. A task whose attempts fail on max_attempts distinct workers (deadline passed,
// holder gone or silent, invalid results, a retryable error) fails its job with the last reason.
//
// Faulty workers (docs/SCHEDULER.md, "Faulty workers"; FaultOptions): a failed attempt is charged
// to its worker as well as its task. The task is not leased to that worker again while another
// eligible worker is registered, nor before exclusion_grace_ms has passed; a worker charged
// quarantine_failures times inside quarantine_window_ms is quarantined (no tasks, its leases back
// to pending, a notice for its stream: TakeQuarantines) until quarantine_ms has passed or an
// admin lifts it (LiftQuarantine). Disconnects and restarts are counted against the task only.
// A job that has made no progress for job_wait_ms because of faults (every worker of its model
// quarantined, a disagreement no third worker can decide) fails, naming why; a job merely waiting
// for workers to register waits as long as it takes. Progress() says why a job waits.
//
// Verified results (docs/SCHEDULER.md, "Verified results"): a seeded fraction of each job's tasks
// (JobSpec::verify_fraction; VerificationSelected) counts as done only once two distinct workers
// returned results that agree: bitwise when both report the same numerics string, else within
// the tolerance of their device classes (ResultsAgree). A run that awaits its peer is held in
// memory and its task goes back to pending for another worker; when two runs agree, the task
// completes with them and every worker whose run disagreed is outvoted: quarantined, and every
// task it completed in the job is reopened and recomputed. A first run with no other eligible
// worker registered for verify_wait_ms completes unverified (counted in the profile). Held runs
// are not durable: after a restart their tasks simply run again.
//
// Identity: a registration of a worker id whose session was heard from within live_session_ms
// is refused (AlreadyExists naming that session) unless it asks to replace it or comes from the
// same process (WorkerRegistration::instance).
//
// Ended jobs: every job that succeeds, fails or is cancelled through this class is queued for
// TakeEndedJobs(), so the adapter can tell workers to drop the job's data.
//
// Rounds (docs/SCHEDULER.md): an until_stable job is planned one round of params.samples samples
// at a time. When a round's last task is done the profile of every sample so far is assembled;
// unless it is stable or params.max_samples is reached, the job is extended by the next round
// (TaskResultsOutcome::job_extended, ExpireOutcome::jobs_extended) and the adapter offers the new
// tasks to idle workers. The profile finally written is bit for bit the one of `ripplekv
// calibrate --until-stable` with the same flags (but for its created_at).
//
// Reads for the adapters: filtered, paged listings of jobs and profile versions, typed (parsed)
// profiles and budget maps computed from them, and the data of an active job, so the gRPC
// adapters only convert messages and map Status codes (they never read the store).
//
// Model summary (docs/SCHEDULER.md, "The recorded model summary"): workers report their model
// (hash, architecture, name, n_layers, n_kv_heads, head_dim, d_model, vocab_size) at
// registration, and each keeps its own. One summary per hash is *recorded*, durably
// (Store::PutModelSummary), and goes into the hash's profiles; it is never taken from a single
// registration, so no worker can lock the others of its hash out:
//   - from the first job's model (its ModelRef: n_layers, and name when the submitter gave one):
//     the summary of the most registered workers that agree with it (a tie records nothing), or
//   - without such a job, from agreement: the summary that at least two registered workers report
//     (the most workers; a tie records nothing).
// Until then workers with differing summaries all register. Once recorded, a registration that
// differs is refused (FailedPrecondition naming each differing field with both values), and a
// registered worker that differs is dropped: its leases return to pending and its next call gets
// FailedPrecondition saying why. Until a hash's summary is recorded, a job's tasks go only to
// workers agreeing with the job's ModelRef. A restarted scheduler takes a job's ModelRef from the
// job (its layer count from its tasks; the name is not stored). SubmitJob needs the model's layer
// count: given in the request, or known from the recorded summary or the registered workers.
//
// Thread-safety: every method may be called from any thread; calls are serialized by one mutex,
// except the store write of a completion, which runs on the CompletionCommitter's thread so that
// completions arriving together share one write, and the caller need not wait for it
// (SubmitTaskResults).
// The store must outlive the Scheduler.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "scheduler/core/completion_committer.h"
#include "store/store.h"
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
  store::MethodParams params;
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

// A quarantine the adapter should tell its worker about (TakeQuarantines).
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

// A lease the adapter should revoke on the worker (its job ended, or its deadline passed).
struct Revocation {
  std::string worker_id;
  LeaseId lease;
  std::string reason;  // one line, for the worker's log
};

struct ExpireOutcome {
  std::vector<std::string> dropped_workers;  // silent past heartbeat_timeout_ms
  std::vector<store::TaskKey> released;      // leases returned to pending, canonical order
  std::vector<Revocation> revocations;       // expired leases whose holder is still registered
  std::vector<uint32_t> profiles_written;    // versions of jobs finished by this tick
  // Until_stable jobs left complete at the end of a round that this tick extended by the next
  // round (their new tasks are pending).
  std::vector<store::JobId> jobs_extended;
  // Jobs complete but not yet profiled that this tick could not finish (the model's summary is
  // unknown, or the store failed), one line each; retried on the next tick.
  std::vector<std::string> finish_errors;
};

// A job that reached a final state through this class (TakeEndedJobs).
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
  bool already_cancelled = false;       // the job was cancelled before: nothing was changed
  std::vector<Revocation> revocations;  // leases workers should abandon (empty when already
                                        // cancelled)
};

// Paging of the listings (AIP-158). A page token is the decimal offset of the page's first item
// in the listing, so it stays meaningful while the listing does not change between pages.
inline constexpr int32_t kDefaultPageSize = 50;  // items per page when none is asked
inline constexpr int32_t kMaxPageSize = 1000;    // a larger page size is cut to this

struct PageRequest {
  int32_t page_size = 0;   // items; 0: kDefaultPageSize; above kMaxPageSize: kMaxPageSize;
                           // negative: InvalidArgument naming "page_size"
  std::string page_token;  // empty: the first page; else a next_page_token of the same listing
                           // (InvalidArgument naming "page_token" for anything else)
};

// The page's [begin, end) in a listing of `total` items, and the token of the next page (empty
// on the last page). Every listing of the scheduler, CalibrationService's and RolloutService's,
// pages this way. Errors: InvalidArgument naming page_size or page_token.
struct PageRange {
  size_t begin = 0;
  size_t end = 0;
};
[[nodiscard]] StatusOr<PageRange> Page(const PageRequest& page, size_t total);
std::string NextPageToken(const PageRange& range, size_t total);

struct JobFilter {
  std::vector<store::JobState> states;  // keep jobs in one of these states; empty: every state
  std::string model_hash;               // keep jobs of this model; empty: every model
  PageRequest page;
};

struct JobPage {
  // Newest first: by create time, then id, both descending. spec.data_inline left empty.
  std::vector<store::Job> jobs;
  std::string next_page_token;  // empty on the last page
};

struct TaskPage {
  // In (sample, layer) order; lease fields as stored (a lease past its deadline that ExpireLeases
  // has not returned yet still reads as leased).
  std::vector<store::Task> tasks;
  std::string next_page_token;  // empty on the last page
};

// A stored profile version, parsed (method/profile.h), with the store's record of it.
struct StoredProfile {
  std::string model_hash;
  uint32_t version = 0;              // 1, 2, ... per model hash
  store::JobId job = store::kNoJob;  // the job that measured it; kNoJob for an imported profile
  store::TimeMs created_at_ms = 0;   // when the store wrote it, ms since the epoch
  method::SensitivityProfile profile;
};

struct ProfilePage {
  std::vector<StoredProfile> profiles;  // by model hash (bytewise), then version descending
  std::string next_page_token;          // empty on the last page
};

struct ProfileBudgetMap {
  StoredProfile profile;  // the version the map was computed from (kLatestVersion resolved)
  method::BudgetMap map;
};

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

class Scheduler {
 public:
  // `store` is not owned and must outlive this object.
  Scheduler(store::Store* store, SchedulerOptions options, Clock clock);

  ~Scheduler();  // StopCompletions()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Validates (ValidateJobSpec, InvalidArgument naming the field), plans one task per
  // (sample, layer) and creates the job in one store write. An idempotency key naming an equal
  // job returns that job with created = false (decided in the same store write, so concurrent
  // submits of one key create one job and exactly one of them gets created = true); a different
  // one is AlreadyExists. ResourceExhausted (saying what is pending and the cap) when the job's
  // inline data would take the pending jobs' past max_pending_inline_bytes. Store errors pass
  // through.
  [[nodiscard]] StatusOr<SubmitOutcome> SubmitJob(const SubmitRequest& request);

  // Registers (or re-registers, releasing the leases of the previous registration) a worker,
  // starting its heartbeat clock, and records the hash's summary when this registration makes it
  // known (see "Model summary" above; that may drop registered workers that differ).
  // InvalidArgument: empty id, capacity 0, empty or invalid model summary (hash empty, any count
  // <= 0). FailedPrecondition: the summary differs from the one recorded for its hash (the message
  // names each differing field, with the recorded value); nothing changes for other workers; or
  // the worker is quarantined (the message says why and until when). AlreadyExists: another
  // session holds the id and was heard from within live_session_ms (see "Identity" above).
  [[nodiscard]] Status RegisterWorker(const WorkerRegistration& registration);

  // Records that the worker is alive and holds the prefills `held`; moves the deadline of each
  // lease in `leases` that it holds to min(now + lease_duration_ms, the task deadline). Leases it
  // holds but does not list keep their deadline (an assignment may still be in flight); listed
  // leases it does not hold are ignored. NotFound: unknown worker (it must register again);
  // FailedPrecondition, saying why, for a worker dropped because its model summary differs from
  // the recorded one (so do the other calls naming a worker).
  [[nodiscard]] Status Heartbeat(const std::string& worker_id, std::span<const PrefillKey> held,
                                 std::span<const LeaseId> leases);

  // The worker disconnected: forgets it and returns its leases to pending. NotFound: unknown.
  [[nodiscard]] Status WorkerGone(const std::string& worker_id);

  // Leases the next task for the worker, or nullopt when it is at capacity or no active job of
  // its model has a pending task. Jobs by priority (highest) then age; within the job: a task of
  // a sample whose prefill the worker holds (the sample it was given last first), else a task of
  // the sample it was given last, else the lowest task of a sample no other worker holds or
  // works on, else the lowest (sample, layer). Until the model's summary is recorded, only jobs
  // whose ModelRef the worker's summary agrees with. NotFound: unknown worker.
  [[nodiscard]] StatusOr<std::optional<Assignment>> NextTask(const std::string& worker_id);

  // Completes the worker's lease `lease` with every result of its task, without waiting for the
  // write. The checks run now, and their errors are returned (`done` is then never called):
  // NotFound: unknown worker; FailedPrecondition: `lease` is not a lease the worker holds now
  // (never leased, expired, another attempt): nothing changes. InvalidArgument: the results are
  // not exactly trials 0..trials-1 of the task, or one fails method::CheckTrialKl: the attempt
  // fails (FailAttempt) and the message says why.
  // Once checked, the lease no longer counts against the worker's capacity (its next task can be
  // leased at once), and the results go to the CompletionCommitter: one store write shared with
  // the completions that arrive meanwhile. `done` then runs on the committer's thread with the
  // outcome, the results durable. When the job's last task completes, that thread aggregates
  // ListResults with AggregateProfile and writes the profile version that finishes the job. A
  // failed write leaves the task leased in the store until its lease expires (then pending).
  // A task selected for verification may instead be held (Submitted::kAwaitingVerification;
  // `done` is then never called): see "Verified results" above.
  using CompletionDone = std::function<void(StatusOr<TaskResultsOutcome>)>;
  [[nodiscard]] StatusOr<Submitted> SubmitTaskResults(const std::string& worker_id,
                                                      const LeaseId& lease,
                                                      std::vector<store::TrialResult> results,
                                                      CompletionDone done);

  // SubmitTaskResults, waiting for the outcome (a held run: an outcome with nothing stored).
  [[nodiscard]] StatusOr<TaskResultsOutcome> CompleteTask(
      const std::string& worker_id, const LeaseId& lease,
      std::span<const store::TrialResult> results);

  // Writes the completions submitted so far and stops taking more (their `done` then gets
  // Unavailable): for shutdown, before what the callbacks use goes away. Idempotent.
  void StopCompletions() { committer_.Stop(); }

  // The attempt `lease` failed (`why`: a retryable error, invalid results): its lease returns to
  // pending and the failure is counted; the task's max_attempts-th failure fails the job.
  // NotFound: unknown worker; FailedPrecondition: not a lease the worker holds now.
  [[nodiscard]] Status FailAttempt(const std::string& worker_id, const LeaseId& lease,
                                   const std::string& why);

  // A worker's description of a job's calibration set (source, shape, token fingerprint): kept
  // with the job (the first report wins) and written into its profile as data_source, as
  // `ripplekv calibrate` writes it. Ignored for final jobs and for jobs described already; a later
  // report that differs is logged by the caller (outcome false: it differs from the stored one).
  // NotFound: unknown job; InvalidArgument: see Store::SetDataDescription.
  [[nodiscard]] StatusOr<bool> DescribeJobData(store::JobId id, const std::string& description);

  // The worker refused lease `lease` for a reason that holds for the whole job on this worker (it
  // cannot read the job's data; its model is not the job's): the lease returns to pending and
  // none of the job's tasks is offered to this worker again (until it registers again). When
  // `fail_if_none_left` and every registered worker of the job's model has now refused the job,
  // the job fails with `why` (outcome true). NotFound: unknown worker or job;
  // FailedPrecondition: not a lease the worker holds now.
  [[nodiscard]] StatusOr<bool> RefuseJob(const std::string& worker_id, const LeaseId& lease,
                                         bool fail_if_none_left, const std::string& why);

  // The worker gives lease `lease` back unrun (it cannot take it now): the lease returns to
  // pending, no failure counted. NotFound: unknown worker; FailedPrecondition: not a lease the
  // worker holds now.
  [[nodiscard]] Status ReleaseTask(const std::string& worker_id, const LeaseId& lease);

  // The holder of lease `lease` found its task invalid: the job fails with `why`. NotFound:
  // unknown worker; FailedPrecondition: not a lease the worker holds now, or the job is final.
  [[nodiscard]] Status FailJobOfLease(const std::string& worker_id, const LeaseId& lease,
                                      const std::string& why);

  // Fails an active job: no more tasks are handed out. NotFound; FailedPrecondition when the job
  // is already final.
  [[nodiscard]] Status FailJob(store::JobId id, const std::string& why);

  // Call periodically: drops workers silent past heartbeat_timeout_ms (their leases return to
  // pending), returns every lease past its deadline to pending (each a failed attempt), and
  // finishes jobs whose tasks are all done but that have no profile yet (a crash between the two
  // writes, or a model summary that was unknown then).
  // While the store cannot write (store::Store::write_failure), it does nothing: nothing moves
  // until the store is writable again.
  [[nodiscard]] StatusOr<ExpireOutcome> ExpireLeases();

  // After the store was reopened to recover from a failed write (store/recovering_store.h):
  // forgets what was read from it (the active jobs, the pending tasks), so that the next
  // hand-out reads it again, and returns to pending every task the store has leased that no
  // registered worker holds (a completion whose write failed: it runs again). While the store
  // cannot write, NextTask hands out nothing and Heartbeat extends no lease in the store.
  void StoreReopened();

  // The jobs that ended since the last call, in the order they ended.
  std::vector<EndedJob> TakeEndedJobs();

  // Change notification for watchers: a counter that every change of a job's state or progress
  // (submit, lease, completion, release, failure, cancellation, expiry) increases. Returns the
  // counter once it differs from `seen`, or after `timeout_ms` (then possibly equal to `seen`).
  uint64_t WaitForChange(uint64_t seen, int64_t timeout_ms);

  // Cancels a pending or running job: its tasks are no longer handed out and later results are
  // ignored. Returns the job after cancelling and the leases workers should abandon. Cancelling
  // a cancelled job changes nothing and is not an error (outcome.already_cancelled). NotFound;
  // FailedPrecondition when the job succeeded or failed.
  [[nodiscard]] StatusOr<CancelOutcome> CancelJob(store::JobId id, const std::string& reason = {});

  // Progress of a job for WatchJob. NotFound for an unknown job.
  [[nodiscard]] StatusOr<JobProgress> Progress(store::JobId id);

  // ---- Reads (each reads one consistent store snapshot; only JobData takes this class's lock,
  // briefly, to check the worker's leases) ----

  // The spec of an active job with its data (inline content included), for a worker deriving its
  // samples; the worker must hold a lease of the job. NotFound (unknown job or worker);
  // PermissionDenied (the worker holds no lease of the job); FailedPrecondition ("job N is
  // cancelled") when the job is final.
  [[nodiscard]] StatusOr<store::JobSpec> JobData(const std::string& worker_id,
                                                 store::JobId id) const;

  // One page of the jobs that pass `filter`, newest first. InvalidArgument naming page_size or
  // page_token (see PageRequest); store errors pass through. O(jobs) per call.
  [[nodiscard]] StatusOr<JobPage> ListJobs(const JobFilter& filter) const;

  // One page of a job's tasks, in (sample, layer) order, with who completed each (for
  // CalibrationService.ListJobTasks). InvalidArgument as ListJobs; NotFound for an unknown job;
  // FailedPrecondition for a purged one. O(tasks of the job) per call.
  [[nodiscard]] StatusOr<TaskPage> ListTasks(store::JobId id, const PageRequest& page) const;

  // Version `version` of the model's profile (kLatestVersion: the latest), parsed. NotFound
  // when there is no such version; DataLoss ("stored profile H version V: ...") when the stored
  // document does not parse as a profile.
  [[nodiscard]] StatusOr<StoredProfile> GetProfile(const std::string& model_hash,
                                                   uint32_t version = store::kLatestVersion) const;

  // One page of the profile versions of `model_hash` (of every model when empty), by hash then
  // version descending; only the page's documents are parsed. InvalidArgument as ListJobs;
  // DataLoss as GetProfile.
  [[nodiscard]] StatusOr<ProfilePage> ListProfiles(const std::string& model_hash,
                                                   const PageRequest& page) const;

  // The budget map of profile version `version` (kLatestVersion: the latest) under `options`,
  // computed by method::ComputeBudgetMap. Errors: GetProfile's; FailedPrecondition when the
  // profile cannot give a budget map under any options (it misses a layer; the message is the
  // method's, naming the layer); InvalidArgument (with the numbers) when `options` do not fit
  // this profile (bounds infeasible for its layer count, a budget above max_context, ...).
  [[nodiscard]] StatusOr<ProfileBudgetMap> GetBudgetMap(const std::string& model_hash,
                                                        uint32_t version,
                                                        const method::BudgetOptions& options) const;

  // Ids of the registered workers, sorted.
  std::vector<std::string> Workers() const;

  // One page of the registered workers and the quarantined ids, by id. InvalidArgument naming
  // page_size or page_token.
  [[nodiscard]] StatusOr<WorkerPage> ListWorkers(const PageRequest& page) const;

  // Lifts the quarantine of `worker_id` and forgets the failures charged to it; returns why it
  // was quarantined. NotFound when it is not quarantined.
  [[nodiscard]] StatusOr<std::string> LiftQuarantine(const std::string& worker_id);

  // The quarantines since the last call, in order: the adapter tells each worker on its stream.
  std::vector<QuarantineNotice> TakeQuarantines();

  // Called on the committer's thread with the outcome of a held verification run that completed
  // unverified (no caller waits for it: ExpireLeases queued it), so the adapter logs it and acts
  // on a job it finished or extended as for any completion. Null: nobody is told. Replacing it
  // waits for a call in flight, so an adapter going away resets it first.
  using HeldCompletionListener =
      std::function<void(const std::string& worker_id, const store::TaskKey& key,
                         const StatusOr<TaskResultsOutcome>& outcome)>;
  void SetHeldCompletionListener(HeldCompletionListener listener);

  // Task completions written so far and the store writes that carried them (group commit).
  CompletionCommitter::Counts CommitCounts() const { return committer_.counts(); }

 private:
  // A lease as the store holds it: the scheduler's memory mirrors every lease in the store, so
  // expiry needs no scan of the store.
  struct Lease {
    uint32_t attempt = 0;
    int64_t lease_deadline_ms = 0;  // the store's deadline: renewed by heartbeats
    int64_t task_deadline_ms = 0;   // the lease never extends past this
    uint32_t trials = 0;            // the job's params.trials
    int64_t leased_ms = 0;          // when it was leased (the result-latency metric)
  };
  // A lease whose task's results were submitted and are being written: no longer the worker's
  // (its slot is free), still leased in the store until the write lands.
  struct Completing {
    std::string worker_id;
    Lease lease;
  };
  struct WorkerState {
    method::ProfileModel model;
    uint32_t capacity = 1;
    std::string version;  // recorded with the tasks it completes (store::Task::completed_by*)
    std::string host;
    std::string device;
    std::string numerics;
    std::string instance;
    int64_t registered_ms = 0;
    uint64_t tasks_completed = 0;  // results it delivered that passed the checks
    int64_t last_seen_ms = 0;
    std::set<PrefillKey> held;
    std::map<store::JobId, uint32_t> last_sample;  // affinity: sample given last, per job
    std::map<store::TaskKey, Lease> leased;
    std::set<store::JobId> refused_jobs;  // jobs it refused as a whole (RefuseJob)
  };
  // A task's failed attempts: the distinct workers they failed on (max_attempts counts these),
  // when each last failed it (exclusion), and the last reason.
  struct TaskFailures {
    std::map<std::string, int64_t> failed_at;
    std::string last_reason;
  };
  // What the scheduler holds about a worker id beyond one registration: the failures charged to
  // it and its quarantine (FaultOptions). Erased once it holds nothing worth keeping.
  struct WorkerHealth {
    std::vector<int64_t> failures;   // times charged, inside the quarantine window, oldest first
    int64_t quarantined_until = 0;   // ms; 0: not quarantined
    std::string quarantine_reason;
    std::string model_hash;          // of its last registration
    int64_t last_seen_ms = 0;        // when it was last heard from, as registered
  };
  // A run of a task selected for verification, held until another agrees with it.
  struct VerifyRun {
    std::string worker_id;
    std::string numerics;
    std::vector<store::TrialResult> results;  // exactly the task's trials, by trial
  };
  struct Verification {
    std::vector<VerifyRun> runs;  // from distinct workers, in arrival order
    int64_t first_ms = 0;         // when the first run arrived
  };
  // A job's verification record, for its progress and its profile.
  struct JobVerification {
    uint64_t verified = 0;
    uint64_t unverified = 0;
    uint64_t recomputed = 0;
    std::vector<method::ProfileVerification::Disagreement> disagreements;
    std::set<std::string> outvoted;  // workers outvoted in this job: what they complete is redone
  };
  struct RateObservation {
    int64_t first_ms = 0;
    uint64_t first_done = 0;
    int64_t last_ms = 0;
    uint64_t last_done = 0;
  };

  using PendingSet = std::set<store::TaskKey>;  // canonical (sample, layer) order

  std::optional<store::TaskKey> Choose(const std::string& worker_id, const WorkerState& worker,
                                       store::JobId job, const PendingSet& pending,
                                       int64_t now) const;
  // Whether `key` may be leased to `worker_id` now (verification runs and failure exclusion).
  bool MayLease(const std::string& worker_id, const WorkerState& worker, const store::TaskKey& key,
                int64_t now) const;
  // Whether a registered worker other than `worker_id`, of model `hash`, healthy, that has not
  // refused the job and neither failed nor ran `key`, could take `key`.
  bool OtherEligible(const std::string& worker_id, const std::string& hash,
                     const store::TaskKey& key) const;
  bool Quarantined(const std::string& worker_id, int64_t now) const;
  // Charges a failed attempt to `worker_id`: quarantines it at quarantine_failures inside the
  // window.
  [[nodiscard]] Status ChargeWorker(const std::string& worker_id, const std::string& why);
  // Quarantines `worker_id` (registered or not) for quarantine_ms: its leases return to pending
  // uncounted, its held verification runs are dropped, and a notice is queued.
  [[nodiscard]] Status Quarantine(const std::string& worker_id, const std::string& why);
  // Verification of a checked run of `key` by the worker (see "Verified results"). Returns the
  // results to commit now, or nullopt when the run is held (its lease was released).
  [[nodiscard]] StatusOr<std::optional<std::vector<store::TrialResult>>> Verify(
      const std::string& worker_id, WorkerState& worker, const store::TaskKey& key,
      std::vector<store::TrialResult> results);
  // Reopens every task `worker_id` completed in `job` for recomputation.
  [[nodiscard]] Status Recompute(store::JobId job, const std::string& worker_id);
  // Returns done tasks of `job` to pending with their results deleted (Store::ReopenTasks), into
  // the index, counted as recomputed in the job's verification record.
  [[nodiscard]] Status Reopen(store::JobId job, std::span<const store::TaskKey> keys);
  // The health record of `worker_id`, created if missing, with its model and last heartbeat
  // refreshed from the registry while it is registered.
  WorkerHealth& HealthOf(const std::string& worker_id);
  // Queues `results` of `key` for the store write with no lease and no caller waiting (a held
  // run completing unverified).
  void CommitHeld(const store::TaskKey& key, const VerifyRun& run);
  // Why `job` makes no progress now, and whether faults cause it (so job_wait_ms applies);
  // empty while it progresses or has nothing to hand out.
  struct Waiting {
    std::string reason;
    bool fault = false;
  };
  Waiting WaitingReason(const store::Job& job) const;
  // Commits held runs that waited verify_wait_ms with nobody to verify them, lifts quarantines
  // that ran out, forgets idle health records, and fails jobs stalled by faults past job_wait_ms
  // (for ExpireLeases).
  [[nodiscard]] Status TickFaults(int64_t now);
  // Fails pending jobs submitted more than pending_job_ttl_ms ago (for ExpireLeases).
  [[nodiscard]] Status ExpirePendingJobs(int64_t now);
  // The inline data bytes that pending jobs hold, from the active jobs.
  [[nodiscard]] StatusOr<uint64_t> PendingInlineBytes();
  // The job's verify fraction, from the active jobs (0 for a job not active).
  double VerifyFraction(store::JobId job);
  // The pending tasks of `job`, loaded from the store on first use.
  [[nodiscard]] StatusOr<PendingSet*> Pending(store::JobId job);
  // A lease of `key` went back to pending in the store.
  void MarkPending(const store::TaskKey& key);
  // On the committer's thread, once a completion is written: the index, the job's progress, and
  // the profile when it was the job's last task.
  StatusOr<TaskResultsOutcome> AfterCompletion(const store::TaskKey& key, uint32_t attempt,
                                               const std::string& worker_id,
                                               const store::ResultWriteOutcome& written);
  // The active job `id` (priority order list), or null when it is not active.
  const store::Job* ActiveJob(store::JobId id);
  // The worker and its lease `lease`. NotFound: unknown worker; FailedPrecondition: not held now.
  [[nodiscard]] StatusOr<WorkerState*> HeldLease(const std::string& worker_id,
                                                 const LeaseId& lease);
  // Returns a lease the worker holds to pending in the store and the index.
  [[nodiscard]] Status Release(const std::string& worker_id, WorkerState& worker,
                               const store::TaskKey& key);
  // Counts a failed attempt of `key`; the max_attempts-th fails the job.
  // `charge`: the worker is at fault (not a disconnect or the store's slowness), so the failure
  // counts towards its quarantine too.
  [[nodiscard]] Status CountFailure(const store::TaskKey& key, const std::string& worker_id,
                                    const std::string& why, bool charge);
  // Drops a worker; its leases return to pending, each a failed attempt (`why`).
  [[nodiscard]] Status DropWorker(const std::string& worker_id, const std::string& why);
  // Moves an active job to a final state and forgets its in-memory state.
  [[nodiscard]] Status EndJob(store::JobId id, store::JobState state, const std::string& why,
                              const std::string& model_hash);
  void ForgetJob(store::JobId id);
  // What FinishJob did with a complete job: wrote its profile (version > 0), or, for an
  // until_stable job not yet stable below its cap, began its next round (samples_planned).
  struct Finished {
    uint32_t profile_version = 0;
    bool extended = false;
    uint32_t samples_planned = 0;  // when extended
  };
  // Aggregates a complete job (its record without inline data is enough) into its profile over
  // its samples planned. An until_stable job whose profile is not stable (method::ComputeStability
  // with default options, as worker::CalibrateUntilStable) and that is below max_samples is
  // extended by the next round (Store::ExtendJob, one write) and its new tasks indexed as
  // pending; otherwise the profile is written and the job succeeds.
  [[nodiscard]] StatusOr<Finished> FinishJob(const store::Job& job);
  // FinishJob's extension of `job` (complete) to `samples_planned` samples.
  [[nodiscard]] StatusOr<Finished> BeginRound(const store::Job& job, int64_t model_n_layers,
                                              uint32_t samples_planned);
  // Loads the stored model summaries into models_ once.
  [[nodiscard]] Status LoadModels();
  // What a job's submitter said of its model: 0 / empty when not given.
  struct ModelRef {
    int64_t n_layers = 0;
    std::string name;
    // Whether a worker's summary agrees with what was given (fields not given agree).
    bool Admits(const method::ProfileModel& m) const {
      return (n_layers == 0 || m.n_layers == n_layers) && (name.empty() || m.name == name);
    }
  };
  // The ModelRef of an active job: as submitted to this process, else derived from the job.
  const ModelRef& JobRef(const store::Job& job);
  // Records the summary of `hash` when none is recorded and the registered workers establish one
  // ("Model summary" above), then drops every registered worker of the hash that differs.
  [[nodiscard]] Status RecordModel(const std::string& hash);
  // The error for a call naming a worker that is not registered: FailedPrecondition with the
  // reason when it was dropped for its model summary, else NotFound.
  Status UnknownWorker(const std::string& worker_id) const;
  [[nodiscard]] Status FinishReadyJobs(ExpireOutcome& outcome);
  void ObserveProgress(const store::Job& job);
  int64_t TaskDeadline(const store::JobSpec& spec, const method::ProfileModel& model,
                       int64_t now) const;
  // Requires mu_: a job's state or progress changed (WaitForChange).
  void Changed();

  store::Store* const store_;
  const SchedulerOptions options_;
  const Clock clock_;
  CompletionCommitter committer_;  // completions' store writes, grouped (no lock of this class)

  // The metrics of SchedulerOptions::metrics (each series lives as long as its registry).
  struct Metrics {
    explicit Metrics(telemetry::MetricsRegistry& registry);
    telemetry::Counter& tasks_leased;
    telemetry::Counter& tasks_completed;
    telemetry::Counter& tasks_retried;
    telemetry::Counter& lease_expiries;
    telemetry::Counter& workers_lost;
    telemetry::Counter& jobs_succeeded;
    telemetry::Counter& jobs_failed;
    telemetry::Counter& jobs_cancelled;
    telemetry::Histogram& result_latency;
    telemetry::Counter& quarantines;
    telemetry::Gauge& workers_quarantined;
    telemetry::Counter& tasks_verified;
    telemetry::Counter& verification_disagreements;
    telemetry::Counter& tasks_recomputed;
    telemetry::Counter& tasks_unverified;
  };
  std::unique_ptr<telemetry::MetricsRegistry> own_metrics_;  // when options_.metrics is null
  Metrics metrics_;
  // Records that job `ended` reached a final state: for TakeEndedJobs and the metrics.
  void NoteEnded(EndedJob ended);

  mutable std::mutex mu_;
  std::condition_variable changed_;  // with mu_; signalled by Changed()
  uint64_t changes_ = 0;             // guarded by mu_
  std::map<std::string, WorkerState> workers_;
  std::map<std::string, method::ProfileModel> models_;  // by hash, the recorded ones (durable)
  bool models_loaded_ = false;                          // the stored ones are in models_
  // By hash without a recorded summary: the ModelRef of its first job (RecordModel).
  std::map<std::string, ModelRef> first_refs_;
  std::map<store::JobId, ModelRef> job_refs_;  // active jobs' ModelRefs; dropped when a job ends
  // Workers dropped because their summary differs from the recorded one, with why; an entry goes
  // when the worker registers again.
  std::map<std::string, std::string> evicted_;
  std::map<store::JobId, RateObservation> rates_;
  std::map<store::JobId, PendingSet> pending_;  // loaded jobs only; dropped when a job ends
  // The store's active jobs (priority, then age) for NextTask; read again after a job is created
  // or ends (only this class changes which jobs are active).
  std::optional<std::vector<store::Job>> active_jobs_;
  std::map<store::JobId, std::string> data_descriptions_;  // as stored; dropped when a job ends
  std::map<store::TaskKey, TaskFailures> failures_;        // dropped when the job ends
  std::map<std::string, WorkerHealth> health_;             // by worker id
  std::vector<QuarantineNotice> quarantines_;              // until TakeQuarantines
  std::map<store::TaskKey, Verification> verifying_;       // held runs; dropped when the job ends
  std::map<store::JobId, JobVerification> verification_;   // dropped when the job ends
  std::map<store::JobId, int64_t> stalled_since_;          // jobs waiting on faults, since when
  uint64_t verify_key_ = 0;                                // FaultOptions::verify_key or random
  std::mutex listener_mu_;  // held while the listener runs; never with mu_
  HeldCompletionListener held_listener_;  // guarded by listener_mu_
  std::map<store::TaskKey, Completing> completing_;        // results submitted, write pending
  std::vector<EndedJob> ended_;                            // until TakeEndedJobs
  // !ended_.empty(), readable without mu_ (TakeEndedJobs runs after every worker message).
  std::atomic<bool> any_ended_{false};
  std::atomic<bool> any_quarantined_{false};  // !quarantines_.empty(), likewise
  // Jobs whose tasks may all be done without a profile: every active job until the first
  // ExpireLeases has looked (a crash may have left some), then those whose FinishJob failed.
  bool checked_unprofiled_ = false;
  std::set<store::JobId> unprofiled_;
};

// The task deadline the scheduler derives when SchedulerOptions::task_deadline_ms is 0: 5 minutes
// plus the task's forward-pass work (the sample's context and every trial's probe through the
// model, 24 d_model^2 FLOPs per token per layer) at a pessimistic 1e10 FLOP/s.
int64_t DeriveTaskDeadlineMs(const store::MethodParams& params, const method::ProfileModel& model);

// Whether task `key` is in the verification sample of a job verifying `fraction` of its tasks,
// under `verify_key`: a hash of (key, job, sample, layer) below fraction, so each task is drawn
// independently with probability `fraction` (0: none; 1: all).
bool VerificationSelected(uint64_t verify_key, const store::TaskKey& key, double fraction);

// Whether two runs' results of one task agree: trial by trial, bitwise when `same_numerics`, else
// within `rel_tolerance` relative (|a - b| <= rel_tolerance * max(|a|, |b|) + 1e-12). Both are
// exactly the task's trials.
bool ResultsAgree(std::span<const store::TrialResult> a, std::span<const store::TrialResult> b,
                  bool same_numerics, double rel_tolerance);

// The relative tolerance for two workers' numerics strings ("<device class>/<build>"): 1e-2
// between two "cpu-fp32" builds, 5e-2 when either is on CUDA or unknown. Equal non-empty strings
// agree bitwise instead (ResultsAgree's same_numerics).
double NumericsTolerance(std::string_view a, std::string_view b);

// Why `r` cannot be a result of task `key` of a job with `trials` trials (another task's, a trial
// out of range, or repeated when `trial_seen`, a KL that fails method::CheckTrialKl), one line;
// empty when it can. The one rule for results, where they arrive and where a task completes.
std::string InvalidTaskResult(const store::TaskKey& key, uint32_t trials,
                              const store::TrialResult& r, bool trial_seen);

// The profile's data_domain for a job (method/calibration_sets.h): "user" for inline data (also
// when the record was read without it: data_inline_bytes) or a path, else the built-in set's
// domain (the default set's when none is named).
std::string_view DataDomainOf(const store::Job& job);

// The profile's data_source line for a spec when no worker described the data: "inline data, N
// bytes", "file PATH" or "built-in calibration text".
std::string DescribeDataSource(const store::Job& job);

}  // namespace ripplekv::scheduler
