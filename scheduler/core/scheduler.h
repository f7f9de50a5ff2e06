#pragma once
// The scheduler core (docs/DESIGN.md §3): plans calibration jobs into (sample, layer) tasks, leases
// them to registered workers (jobs by priority then age, never across model hashes, preferring a
// worker that already holds the sample's prefill), expires leases of silent workers, cancels,
// and when a job's last task is done aggregates its results in canonical order into a new
// profile version. No network: the gRPC adapters in scheduler/service/ call this class.
//
// Structure: this class is the façade the adapters call. It owns one mutex and the per-domain
// managers that keep the state under it, and it does the steps that cross domains (a lease
// released back into its job's pending index, a job ended everywhere at once):
//   - JobManager (job_manager.h): jobs and rounds: the active jobs, their pending-task index,
//     the submission limits, the next round of an until_stable job, pending-job expiry, rates;
//   - WorkerManager (worker_manager.h): workers and leases: the registry, each worker's leases
//     and prefill affinity, the choice of its next task, failures, health and quarantine;
//   - ModelRegistry (model_registry.h): the recorded model summaries and jobs' ModelRefs;
//   - ResultManager (result_manager.h): results and the committer: the results rule, verified
//     results, the completions whose write is in flight, the CompletionCommitter;
//   - Catalog (catalog.h): the reads for the adapters (listings, profiles, budget maps);
//   - EventOutbox (events.h): what workers must be told (revocations, quarantines, ended jobs),
//     appended in order under the mutex and drained by the server (TakeEvents), and the change
//     counter WatchJob streams wait on.
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
// to pending, a QuarantineNotice event for its stream) until quarantine_ms has passed or an
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
// Events: every job that succeeds, fails or is cancelled through this class, every quarantine and
// every lease taken back from a registered worker (expired, or its job cancelled) is appended to
// the outbox as it happens (TakeEvents), so the adapter tells the workers concerned.
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
// Thread-safety: every method may be called from any thread; calls are serialized by one mutex
// (the managers have no lock of their own),
// except the store write of a completion, which runs on the CompletionCommitter's thread so that
// completions arriving together share one write, and the caller need not wait for it
// (SubmitTaskResults).
// The store must outlive the Scheduler.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "scheduler/core/catalog.h"
#include "scheduler/core/completion_committer.h"
#include "scheduler/core/core_metrics.h"
#include "scheduler/core/events.h"
#include "scheduler/core/job_manager.h"
#include "scheduler/core/model_registry.h"
#include "scheduler/core/result_manager.h"
#include "scheduler/core/types.h"
#include "scheduler/core/worker_manager.h"
#include "store/store.h"
#include "store/types.h"
#include "telemetry/metrics.h"

namespace ripplekv::scheduler {

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
  void StopCompletions() { results_.committer().Stop(); }

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
  // pending), returns every lease past its deadline to pending (each a failed attempt; a
  // Revocation event when its holder is still registered), and
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

  // Every event appended since the last call (events.h), in the order they happened: the adapter
  // sends each down the worker streams. Cheap when there is none (no lock taken).
  std::vector<Event> TakeEvents();

  // Change notification for watchers: a counter that every change of a job's state or progress
  // (submit, lease, completion, release, failure, cancellation, expiry) increases. Returns the
  // counter once it differs from `seen`, or after `timeout_ms` (then possibly equal to `seen`).
  uint64_t WaitForChange(uint64_t seen, int64_t timeout_ms);

  // Cancels a pending or running job: its tasks are no longer handed out and later results are
  // ignored. Returns the job after cancelling; a Revocation event for each lease a worker held
  // (appended before the job's EndedJob). Cancelling a cancelled job changes nothing and is not an
  // error (outcome.already_cancelled). NotFound;
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
  // method's, naming the layer) or cannot give the kind asked (options.per_head of a profile
  // without head curves), prefixed "profile H version V: "; InvalidArgument (with the numbers)
  // when `options` do not fit this profile (bounds infeasible for its layer count, a budget above
  // max_context, ...).
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

  // Called on the committer's thread with the outcome of a held verification run that completed
  // unverified (no caller waits for it: ExpireLeases queued it), so the adapter logs it and acts
  // on a job it finished or extended as for any completion. Null: nobody is told. Replacing it
  // waits for a call in flight, so an adapter going away resets it first.
  using HeldCompletionListener = ResultManager::HeldCompletionListener;
  void SetHeldCompletionListener(HeldCompletionListener listener);

  // Task completions written so far and the store writes that carried them (group commit).
  CompletionCommitter::Counts CommitCounts() const { return results_.committer().counts(); }

 private:
  // Returns a lease the worker holds to pending in the store and the index.
  [[nodiscard]] Status Release(const std::string& worker_id, WorkerState& worker,
                               const store::TaskKey& key);
  // Counts a failed attempt of `key`; the max_attempts-th fails the job.
  // `charge`: the worker is at fault (not a disconnect or the store's slowness), so the failure
  // counts towards its quarantine too.
  [[nodiscard]] Status CountFailure(const store::TaskKey& key, const std::string& worker_id,
                                    const std::string& why, bool charge);
  // Quarantines `worker_id` (registered or not) for quarantine_ms: its leases return to pending
  // uncounted, its held verification runs are dropped, and a notice is queued.
  [[nodiscard]] Status Quarantine(const std::string& worker_id, const std::string& why);
  // Drops a worker; its leases return to pending, each a failed attempt (`why`).
  [[nodiscard]] Status DropWorker(const std::string& worker_id, const std::string& why);
  // Moves an active job to a final state and forgets its in-memory state; once the state is
  // written, appends the events of `revoked` (leases its workers must abandon) and the job's
  // EndedJob, in that order.
  [[nodiscard]] Status EndJob(store::JobId id, store::JobState state, const std::string& why,
                              const std::string& model_hash, std::vector<Revocation> revoked = {});
  // Forgets job `id` in every manager.
  void ForgetJob(store::JobId id);
  // Records that job `ended` reached a final state: an event and the metrics.
  void NoteEnded(EndedJob ended);
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
  // Queues the results of a held run of `key` for the store write with no lease and no caller
  // waiting (a held run completing unverified).
  void CommitHeld(const store::TaskKey& key, const ResultManager::VerifyRun& run);
  // On the committer's thread, once a completion is written: the index, the job's progress, and
  // the profile when it was the job's last task.
  StatusOr<TaskResultsOutcome> AfterCompletion(const store::TaskKey& key, uint32_t attempt,
                                               const std::string& worker_id,
                                               const store::ResultWriteOutcome& written);
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
  // extended by the next round (JobManager::BeginRound); otherwise the profile is written and the
  // job succeeds.
  [[nodiscard]] StatusOr<Finished> FinishJob(const store::Job& job);
  // Records the summary of `hash` when none is recorded and the registered workers establish one
  // ("Model summary" above), then drops every registered worker of the hash that differs.
  [[nodiscard]] Status RecordModel(const std::string& hash);
  [[nodiscard]] Status FinishReadyJobs(ExpireOutcome& outcome);
  // Requires mu_: a job's state or progress changed (WaitForChange).
  void Changed() { outbox_.NoteChange(); }

  store::Store* const store_;
  const SchedulerOptions options_;
  const Clock clock_;
  std::unique_ptr<telemetry::MetricsRegistry> own_metrics_;  // when options_.metrics is null
  CoreMetrics metrics_;
  const Catalog catalog_;  // stateless reads: no lock

  mutable std::mutex mu_;  // guards every manager below and the outbox
  JobManager jobs_;
  WorkerManager workers_;
  ModelRegistry models_;
  ResultManager results_;  // its committer's callbacks lock mu_
  EventOutbox outbox_;
};

}  // namespace ripplekv::scheduler
