#include "scheduler/core/scheduler.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "method/profile_aggregate.h"
#include "method/profile_stability.h"
#include "scheduler/core/job_plan.h"

namespace ripplekv::scheduler {
namespace {

// A lease that is gone already (done, expired and re-leased): not an error for the caller.
bool LeaseGone(const Status& s) { return absl::IsFailedPrecondition(s) || absl::IsNotFound(s); }

telemetry::MetricsRegistry& RegistryOf(const SchedulerOptions& options,
                                       std::unique_ptr<telemetry::MetricsRegistry>& own) {
  if (options.metrics != nullptr) return *options.metrics;
  own = std::make_unique<telemetry::MetricsRegistry>();
  return *own;
}

}  // namespace

Scheduler::Scheduler(store::Store* store, SchedulerOptions options, Clock clock)
    : store_(store),
      options_(std::move(options)),
      clock_(std::move(clock)),
      metrics_(RegistryOf(options_, own_metrics_)),
      catalog_(store),
      jobs_(store, options_),
      workers_(store, options_),
      models_(store),
      results_(store, options_, metrics_) {}

// The committer's callbacks use this object: they finish before any member goes.
Scheduler::~Scheduler() { StopCompletions(); }

void Scheduler::NoteEnded(EndedJob ended) {
  metrics_.CountEnded(ended.state);
  outbox_.Append(std::move(ended));
}

std::vector<Event> Scheduler::TakeEvents() {
  // An event appended while this runs is taken by the next call (the next message or tick).
  if (!outbox_.MaybeNonEmpty()) return {};
  std::lock_guard lock(mu_);
  return outbox_.Take();
}

StatusOr<SubmitOutcome> Scheduler::SubmitJob(const SubmitRequest& request) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(models_.Load());
  int64_t n_layers = request.model_n_layers;
  const method::ProfileModel* known = models_.Recorded(request.spec.model_hash);
  if (n_layers == 0) {
    // Without a recorded summary: the count most registered workers of the model (with the
    // submitter's name, when given) report, if one count is the most.
    n_layers = known != nullptr ? known->n_layers
                                : ModelRegistry::AgreedLayers(request.spec.model_hash,
                                                              {.name = request.model_name},
                                                              workers_.workers());
    if (n_layers == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job spec field model.n_layers: not given, and no registered worker holds model ",
          request.spec.model_hash, " with an agreed layer count"));
    }
  } else if (known != nullptr && known->n_layers != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec field model.n_layers: ", n_layers, ", but workers holding model ",
                     request.spec.model_hash, " report ", known->n_layers, " layers"));
  }
  const double verify =
      request.verify_fraction.value_or(options_.faults.default_verify_fraction);
  if (!(verify >= 0 && verify <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec field verify: ", verify, " is not in [0, 1]"));
  }
  store::JobSpec spec = request.spec;
  spec.verify_fraction = verify;
  RETURN_IF_ERROR(ValidateJobSpec(spec, n_layers));
  RETURN_IF_ERROR(jobs_.CheckLimits(spec, n_layers));
  ASSIGN_OR_RETURN(store::CreateJobOutcome outcome, jobs_.Create(spec, n_layers));
  Changed();
  if (outcome.created) {
    models_.NoteCreated(outcome.job.id, request.spec.model_hash,
                        {.n_layers = n_layers, .name = request.model_name});
    // A failed store write leaves the summary unrecorded: the next registration of the model, or
    // the job's completion (FinishJob), tries again. The job exists either way.
    RecordModel(request.spec.model_hash).IgnoreError();
  }
  return SubmitOutcome{.job = std::move(outcome.job), .created = outcome.created};
}

Status Scheduler::RegisterWorker(const WorkerRegistration& registration) {
  std::lock_guard lock(mu_);
  if (registration.worker_id.empty()) {
    return absl::InvalidArgumentError("worker registration field worker_id: is required");
  }
  if (registration.capacity == 0) {
    return absl::InvalidArgumentError("worker registration field capacity: must be >= 1, got 0");
  }
  RETURN_IF_ERROR(ValidateModel(registration.model));
  RETURN_IF_ERROR(models_.Load());
  RETURN_IF_ERROR(models_.CheckRegistration(registration.worker_id, registration.model));
  const std::string& id = registration.worker_id;
  const int64_t now = clock_();
  if (workers_.Quarantined(id, now)) {
    const WorkerManager::Health& h = workers_.health().at(id);
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", id, " is quarantined until ",
        method::FormatIso8601Utc(
            std::chrono::system_clock::time_point(std::chrono::milliseconds(h.quarantined_until))),
        ": ", h.quarantine_reason, " (an admin lifts it with `ripplekv admin unquarantine ", id,
        "`)"));
  }
  if (const WorkerState* old = workers_.Find(id); old != nullptr) {
    const bool same_process =
        !registration.instance.empty() && old->instance == registration.instance;
    if (!registration.replace && !same_process &&
        now - old->last_seen_ms < options_.faults.live_session_ms) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker id ", id, " is held by a live session (host ",
          old->host.empty() ? "?" : old->host, ", ",
          old->version.empty() ? "version not reported" : old->version, ", device ",
          old->device.empty() ? "?" : old->device, ", registered ",
          (now - old->registered_ms) / 1000, " s ago, last heard ",
          (now - old->last_seen_ms) / 1000,
          " s ago); give each worker its own --id (the default is unique per process), or pass "
          "--replace to take it over"));
    }
    RETURN_IF_ERROR(DropWorker(id, absl::StrCat("worker ", id, " restarted")));
  }
  WorkerState& w = workers_.Add(id);
  w.model = registration.model;
  w.capacity = registration.capacity;
  w.version = registration.version;
  w.host = registration.host;
  w.device = registration.device;
  w.numerics = registration.numerics;
  w.instance = registration.instance;
  w.registered_ms = now;
  w.last_seen_ms = now;
  // Durable once recorded, so that a job left complete by a crash can be profiled before any
  // worker of its model registers again.
  RETURN_IF_ERROR(RecordModel(registration.model.hash));
  if (workers_.Find(id) == nullptr) {
    // The summary this registration completed is another group's.
    return absl::FailedPreconditionError(*workers_.Evicted(id));
  }
  // Jobs left complete without a profile are finished by the next ExpireLeases tick, never here:
  // a failing aggregation or store write must not fail a registration.
  return absl::OkStatus();
}

Status Scheduler::RecordModel(const std::string& hash) {
  if (models_.Recorded(hash) != nullptr) return absl::OkStatus();
  if (!models_.HasFirstRef(hash)) {
    // After a restart: the oldest active job of the model, if any, stands for its first job.
    ASSIGN_OR_RETURN(std::vector<store::Job> * active, jobs_.Active());
    const store::Job* oldest = nullptr;
    for (const store::Job& job : *active) {
      if (job.spec.model_hash == hash && (oldest == nullptr || job.id < oldest->id)) oldest = &job;
    }
    if (oldest != nullptr) models_.SetFirstRef(hash, *oldest);
  }
  ASSIGN_OR_RETURN(auto differing, models_.Record(hash, workers_.workers()));
  for (const auto& [id, why] : differing) {
    RETURN_IF_ERROR(DropWorker(id, why));
    workers_.Evict(id, why);
  }
  return absl::OkStatus();
}

Status Scheduler::Heartbeat(const std::string& worker_id, std::span<const PrefillKey> held,
                            std::span<const LeaseId> leases) {
  std::lock_guard lock(mu_);
  // While the store cannot write (StoreReopened), leases wait.
  return workers_.Heartbeat(worker_id, held, leases, clock_(), !store_->write_failure());
}

Status Scheduler::WorkerGone(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  if (workers_.Find(worker_id) == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  return DropWorker(worker_id, absl::StrCat("worker ", worker_id, " disconnected"));
}

Status Scheduler::DropWorker(const std::string& worker_id, const std::string& why) {
  if (workers_.Find(worker_id) == nullptr) return absl::OkStatus();
  const std::map<store::TaskKey, Lease> leased = workers_.Remove(worker_id, clock_());
  for (const auto& [key, lease] : leased) {
    StatusOr<store::Task> t = store_->ReleaseLease(key, worker_id);
    if (t.ok()) {
      jobs_.MarkPending(key);
      Changed();
      // Not the worker's fault as far as anyone knows (a crash, a restart): the task's only.
      RETURN_IF_ERROR(CountFailure(key, worker_id, absl::StrCat(why, " holding it"),
                                   /*charge=*/false));
    } else if (!LeaseGone(t.status())) {
      return t.status();
    }
  }
  return absl::OkStatus();
}

Status Scheduler::Release(const std::string& worker_id, WorkerState& worker,
                          const store::TaskKey& key) {
  worker.leased.erase(key);
  StatusOr<store::Task> t = store_->ReleaseLease(key, worker_id);
  if (t.ok()) {
    jobs_.MarkPending(key);
    Changed();
  } else if (!LeaseGone(t.status())) {
    return t.status();
  }
  return absl::OkStatus();
}

Status Scheduler::CountFailure(const store::TaskKey& key, const std::string& worker_id,
                               const std::string& why, bool charge) {
  const int64_t now = clock_();
  const size_t workers = workers_.CountTaskFailure(key, worker_id, why, now);
  if (charge) {
    if (std::optional<std::string> quarantine = workers_.Charge(worker_id, why, now)) {
      RETURN_IF_ERROR(Quarantine(worker_id, *quarantine));
    }
  }
  if (workers < options_.max_attempts) {
    metrics_.tasks_retried.Add();
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
  if (store::IsTerminal(job.state)) return absl::OkStatus();
  return EndJob(key.job, store::JobState::kFailed,
                absl::StrCat(TaskName(key), " failed ", workers,
                             " attempts on distinct workers; last: ", why),
                job.spec.model_hash);
}

Status Scheduler::Quarantine(const std::string& worker_id, const std::string& why) {
  const int64_t now = clock_();
  if (workers_.MarkQuarantined(worker_id, why, now)) {
    metrics_.quarantines.Add();
    metrics_.workers_quarantined.Add(1);
  }
  outbox_.Append(QuarantineNotice{.worker_id = worker_id,
                                  .reason = why,
                                  .until_ms = workers_.health().at(worker_id).quarantined_until});
  // Its held runs are suspect: their tasks need runs by others.
  results_.DropRunsOf(worker_id);
  WorkerState* w = workers_.Find(worker_id);
  if (w == nullptr) return absl::OkStatus();
  std::vector<store::TaskKey> leased;
  for (const auto& [key, lease] : w->leased) leased.push_back(key);
  for (const store::TaskKey& key : leased) RETURN_IF_ERROR(Release(worker_id, *w, key));
  Changed();
  return absl::OkStatus();
}

Status Scheduler::EndJob(store::JobId id, store::JobState state, const std::string& why,
                         const std::string& model_hash, std::vector<Revocation> revoked) {
  RETURN_IF_ERROR(store_->UpdateJobState(id, state, why).status());
  for (Revocation& revocation : revoked) outbox_.Append(std::move(revocation));
  workers_.DropJobLeases(id);
  ForgetJob(id);
  NoteEnded({.id = id, .model_hash = model_hash, .state = state});
  Changed();
  return absl::OkStatus();
}

void Scheduler::ForgetJob(store::JobId id) {
  jobs_.Forget(id);
  models_.ForgetJob(id);
  workers_.ForgetJobFailures(id);
  results_.ForgetJob(id);
}

uint64_t Scheduler::WaitForChange(uint64_t seen, int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return outbox_.WaitForChange(lock, seen, timeout_ms);
}

StatusOr<std::optional<Assignment>> Scheduler::NextTask(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  WorkerState* found = workers_.Find(worker_id);
  if (found == nullptr) return workers_.UnknownWorker(worker_id);
  WorkerState& w = *found;
  if (w.leased.size() >= w.capacity) return std::optional<Assignment>();
  const int64_t now = clock_();
  if (workers_.Quarantined(worker_id, now)) return std::optional<Assignment>();
  if (store_->write_failure()) return std::optional<Assignment>();  // a lease is a write
  ASSIGN_OR_RETURN(std::vector<store::Job> * active, jobs_.Active());
  for (store::Job& job : *active) {  // priority, then age
    if (job.spec.model_hash != w.model.hash || w.refused_jobs.contains(job.id)) continue;
    if (models_.Recorded(job.spec.model_hash) == nullptr) {
      // Before the summary is recorded, only workers agreeing with the submitter's ModelRef.
      if (!models_.JobRef(job).Admits(w.model)) continue;
    }
    ASSIGN_OR_RETURN(PendingSet * pending, jobs_.Pending(job.id));
    std::optional<store::TaskKey> key = workers_.Choose(worker_id, w, job.id, *pending, now,
                                                        results_);
    if (!key) continue;
    const int64_t task_deadline = jobs_.TaskDeadline(job.spec, w.model, now);
    const int64_t deadline = std::min(now + options_.lease_duration_ms, task_deadline);
    ASSIGN_OR_RETURN(store::Task leased, store_->LeaseTask(*key, worker_id, deadline));
    // The store started the job with its first lease; the pending-inline cap and the pending
    // expiry read the state from this cache.
    job.state = store::JobState::kRunning;
    pending->erase(*key);
    metrics_.tasks_leased.Add();
    w.leased[*key] = Lease{.attempt = leased.attempts,
                           .lease_deadline_ms = leased.lease_deadline_ms,
                           .task_deadline_ms = task_deadline,
                           .trials = static_cast<uint32_t>(job.spec.params.trials),
                           .leased_ms = now};
    Changed();
    const bool held = w.held.contains(PrefillKey{key->job, key->sample});
    w.last_sample[job.id] = key->sample;
    method::CalibrationParams params = job.spec.params;
    params.samples = job.samples_planned;  // the worker reads this many samples
    return std::optional<Assignment>(Assignment{.key = *key,
                                                .lease_deadline_ms = leased.lease_deadline_ms,
                                                .task_deadline_ms = task_deadline,
                                                .model_hash = job.spec.model_hash,
                                                .params = std::move(params),
                                                .trials = static_cast<uint32_t>(job.spec.params.trials),
                                                .attempts = leased.attempts,
                                                .prefill_held = held});
  }
  return std::optional<Assignment>();
}

StatusOr<Submitted> Scheduler::SubmitTaskResults(const std::string& worker_id,
                                                 const LeaseId& lease,
                                                 std::vector<store::TrialResult> results,
                                                 CompletionDone done) {
  const store::TaskKey key = lease.key;
  std::string worker_version;
  {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(WorkerState * worker, workers_.HeldLease(worker_id, lease));
    worker_version = worker->version;
    // Exactly trials 0..trials-1 of this task, each once, each passing the aggregation's rule.
    const std::string invalid =
        ResultManager::CheckResults(key, worker->leased.at(key).trials, results);
    if (!invalid.empty()) {
      const std::string why = absl::StrCat("worker ", worker_id, " sent invalid results for ",
                                           TaskName(key), ": ", invalid);
      RETURN_IF_ERROR(Release(worker_id, *worker, key));
      RETURN_IF_ERROR(CountFailure(key, worker_id, why, /*charge=*/true));
      return absl::InvalidArgumentError(why);
    }
    ++worker->tasks_completed;
    const store::Job* active = jobs_.ActiveJob(key.job);
    if (results_.Selected(key, active == nullptr ? 0.0 : active->spec.verify_fraction)) {
      ASSIGN_OR_RETURN(std::optional<std::vector<store::TrialResult>> agreed,
                       Verify(worker_id, *worker, key, std::move(results)));
      if (!agreed) return Submitted::kAwaitingVerification;
      results = *std::move(agreed);
    }
    // The worker's slot is free now. Until the write lands the lease is completing: should the
    // write fail, it expires from there like any other.
    const auto still = worker->leased.find(key);
    results_.StartCompleting(key, worker_id, still->second);
    worker->leased.erase(still);
    Changed();
  }
  results_.committer().Submit(
      key, std::move(results), {.id = worker_id, .version = std::move(worker_version)},
      [this, key, attempt = lease.attempt, worker_id,
       done = std::move(done)](StatusOr<store::ResultWriteOutcome> written) {
        done(written.ok() ? AfterCompletion(key, attempt, worker_id, *written) : written.status());
      });
  return Submitted::kCommitting;
}

StatusOr<std::optional<std::vector<store::TrialResult>>> Scheduler::Verify(
    const std::string& worker_id, WorkerState& worker, const store::TaskKey& key,
    std::vector<store::TrialResult> results) {
  using Kind = ResultManager::Verdict::Kind;
  ResultManager::Verdict verdict =
      results_.Verify(worker_id, worker.numerics, key, std::move(results), clock_(), [&] {
        return workers_.OtherEligible(worker_id, worker.model.hash, key, clock_(), results_);
      });
  switch (verdict.kind) {
    case Kind::kAgreed:
      for (const std::string& bad : verdict.outvoted) {
        RETURN_IF_ERROR(Quarantine(
            bad, absl::StrCat("outvoted on ", TaskName(key), ": its results differ from those of "
                              "workers ", verdict.agreeing[0], " and ", verdict.agreeing[1],
                              ", which agree")));
        RETURN_IF_ERROR(Recompute(key.job, bad));
      }
      return std::optional<std::vector<store::TrialResult>>(std::move(verdict.results));
    case Kind::kUnverified:
      return std::optional<std::vector<store::TrialResult>>(std::move(verdict.results));
    case Kind::kNoAgreement: {
      ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
      RETURN_IF_ERROR(EndJob(key.job, store::JobState::kFailed, verdict.why, job.spec.model_hash));
      return std::optional<std::vector<store::TrialResult>>();
    }
    case Kind::kHeld:
      break;
  }
  // Held: the task goes back to pending for a distinct worker.
  RETURN_IF_ERROR(Release(worker_id, worker, key));
  return std::optional<std::vector<store::TrialResult>>();
}

Status Scheduler::Recompute(store::JobId job, const std::string& worker_id) {
  ASSIGN_OR_RETURN(std::vector<store::Task> tasks, store_->ListTasks(job));
  std::vector<store::TaskKey> keys;
  for (const store::Task& t : tasks) {
    if (t.state == store::TaskState::kDone && t.completed_by == worker_id) keys.push_back(t.key);
  }
  return Reopen(job, keys);
}

Status Scheduler::Reopen(store::JobId job, std::span<const store::TaskKey> keys) {
  if (keys.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<store::TaskKey> reopened, store_->ReopenTasks(job, keys));
  for (const store::TaskKey& key : reopened) jobs_.MarkPending(key);
  results_.CountRecomputed(job, reopened.size());
  jobs_.Reload();  // the job records' counters changed
  Changed();
  return absl::OkStatus();
}

void Scheduler::CommitHeld(const store::TaskKey& key, const ResultManager::VerifyRun& run) {
  jobs_.Unpend(key);
  std::string version;
  if (const WorkerState* w = workers_.Find(run.worker_id); w != nullptr) version = w->version;
  results_.committer().Submit(
      key, run.results, {.id = run.worker_id, .version = std::move(version)},
      [this, key, worker_id = run.worker_id](StatusOr<store::ResultWriteOutcome> written) {
        if (!written.ok()) {  // the task is pending again, and runs again
          std::lock_guard lock(mu_);
          jobs_.MarkPending(key);
          Changed();
        }
        const StatusOr<TaskResultsOutcome> outcome =
            written.ok() ? AfterCompletion(key, /*attempt=*/0, worker_id, *written)
                         : StatusOr<TaskResultsOutcome>(written.status());
        results_.NotifyHeld(worker_id, key, outcome);
      });
}

void Scheduler::SetHeldCompletionListener(HeldCompletionListener listener) {
  results_.SetHeldListener(std::move(listener));
}

StatusOr<TaskResultsOutcome> Scheduler::CompleteTask(const std::string& worker_id,
                                                     const LeaseId& lease,
                                                     std::span<const store::TrialResult> results) {
  std::promise<StatusOr<TaskResultsOutcome>> outcome;
  ASSIGN_OR_RETURN(
      Submitted submitted,
      SubmitTaskResults(
          worker_id, lease, {results.begin(), results.end()},
          [&outcome](StatusOr<TaskResultsOutcome> o) { outcome.set_value(std::move(o)); }));
  if (submitted == Submitted::kAwaitingVerification) return TaskResultsOutcome{};
  return outcome.get_future().get();
}

StatusOr<TaskResultsOutcome> Scheduler::AfterCompletion(const store::TaskKey& key, uint32_t attempt,
                                                        const std::string& worker_id,
                                                        const store::ResultWriteOutcome& written) {
  std::lock_guard lock(mu_);
  // Outvoted while its write was queued: what it completed is redone like the rest of its work.
  if (written.task_completed && results_.Outvoted(key.job, worker_id)) {
    results_.EraseCompleting(key);
    RETURN_IF_ERROR(Reopen(key.job, {&key, 1}));
    return TaskResultsOutcome{.stored = written.stored};
  }
  // The write cleared the lease (or found the task done already).
  const int64_t leased_ms = results_.FinishCompleting(key, attempt);
  if (written.task_completed) {
    metrics_.tasks_completed.Add();
    if (leased_ms >= 0) {
      metrics_.result_latency.Observe(static_cast<double>(clock_() - leased_ms) / 1000.0);
    }
    // An expiry during the write may have put the task back in the index.
    jobs_.Unpend(key);
  }
  Changed();
  TaskResultsOutcome outcome{.stored = written.stored,
                             .duplicates = written.duplicates,
                             .conflicts = written.conflicts,
                             .task_completed = written.task_completed};
  if (!written.task_completed) return outcome;
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
  jobs_.ObserveProgress(job, clock_());
  // Under mu_, so of the group's last completions exactly one sees the job running and complete.
  if (job.state == store::JobState::kRunning && job.tasks_done == job.tasks_total) {
    StatusOr<Finished> finished = FinishJob(job);
    if (finished.ok()) {
      outcome.profile_version = finished->profile_version;
      outcome.job_succeeded = !finished->extended;
      outcome.job_extended = finished->extended;
      outcome.samples_planned = finished->samples_planned;
    } else {
      jobs_.MarkUnprofiled(job.id);  // retried by ExpireLeases
    }
  }
  return outcome;
}

Status Scheduler::FailAttempt(const std::string& worker_id, const LeaseId& lease,
                              const std::string& why) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(WorkerState * worker, workers_.HeldLease(worker_id, lease));
  RETURN_IF_ERROR(Release(worker_id, *worker, lease.key));
  return CountFailure(lease.key, worker_id, why, /*charge=*/true);
}

StatusOr<Scheduler::Finished> Scheduler::FinishJob(const store::Job& job) {
  const method::ProfileModel* model = models_.Recorded(job.spec.model_hash);
  if (model == nullptr) {
    RETURN_IF_ERROR(RecordModel(job.spec.model_hash));
    model = models_.Recorded(job.spec.model_hash);
  }
  if (model == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id, " is complete but no worker holding model ",
                     job.spec.model_hash, " has registered; it is finished when one does"));
  }
  ASSIGN_OR_RETURN(std::vector<store::TrialResult> stored, store_->ListResults(job.id));
  std::vector<method::TrialKl> trials;
  trials.reserve(stored.size());
  for (const store::TrialResult& r : stored) trials.push_back({r.sample, r.layer, r.trial, r.kl});
  const method::ProfileParams params = method::MeasuredParams(
      job.spec.params, job.samples_planned,
      job.data_description.empty() ? DescribeDataSource(job) : job.data_description,
      std::string(DataDomainOf(job)));
  StatusOr<method::SensitivityProfile> profile = method::AssembleProfile(
      *model, params, trials,
      method::FormatIso8601Utc(
          std::chrono::system_clock::time_point(std::chrono::milliseconds(clock_()))));
  if (profile.ok() && job.spec.verify_fraction > 0) {
    profile->verification = results_.ProfileVerificationOf(job.id, job.spec.verify_fraction);
  }
  if (profile.ok() && job.spec.params.until_stable) {
    // worker::CalibrateUntilStable's criterion, with the same (default) options.
    StatusOr<method::ProfileStability> stability = method::ComputeStability(*profile);
    if (!stability.ok()) {
      profile = stability.status();
    } else {
      profile->stability = *std::move(stability);
      const uint32_t next = NextRoundSamples(job.spec.params, job.samples_planned);
      if (!profile->stability->stable && next > job.samples_planned) {
        ASSIGN_OR_RETURN(const uint32_t planned, jobs_.BeginRound(job, model->n_layers, next));
        Changed();
        return Finished{.extended = true, .samples_planned = planned};
      }
    }
  }
  StatusOr<std::string> json = profile.ok() ? method::ProfileToJson(*profile) : profile.status();
  if (!json.ok()) {
    RETURN_IF_ERROR(EndJob(job.id, store::JobState::kFailed,
                           absl::StrCat("aggregation failed: ", json.status().message()),
                           job.spec.model_hash));
    return json.status();
  }
  ASSIGN_OR_RETURN(store::ProfileVersion version,
                   store_->PutProfileVersion(job.spec.model_hash, *json, job.id));
  ForgetJob(job.id);
  NoteEnded(
      {.id = job.id, .model_hash = job.spec.model_hash, .state = store::JobState::kSucceeded});
  Changed();
  return Finished{.profile_version = version.version};
}

Status Scheduler::FinishReadyJobs(ExpireOutcome& outcome) {
  RETURN_IF_ERROR(models_.Load());
  ASSIGN_OR_RETURN(const std::vector<store::JobId> unprofiled, jobs_.Unprofiled());
  for (const store::JobId id : unprofiled) {
    ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
    if (job.state != store::JobState::kRunning || job.tasks_total == 0 ||
        job.tasks_done != job.tasks_total) {
      jobs_.MarkProfiled(id);
      continue;
    }
    StatusOr<Finished> finished = FinishJob(job);
    if (!finished.ok()) {
      outcome.finish_errors.push_back(absl::StrCat("job ", id, ": ", finished.status().message()));
    } else if (finished->extended) {
      outcome.jobs_extended.push_back(id);
    } else {
      outcome.profiles_written.push_back(finished->profile_version);
    }
  }
  return absl::OkStatus();
}

StatusOr<bool> Scheduler::RefuseJob(const std::string& worker_id, const LeaseId& lease,
                                    bool fail_if_none_left, const std::string& why) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(WorkerState * w, workers_.HeldLease(worker_id, lease));
  const store::TaskKey& key = lease.key;
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
  w->refused_jobs.insert(key.job);
  w->last_sample.erase(key.job);
  RETURN_IF_ERROR(Release(worker_id, *w, key));
  if (!fail_if_none_left || store::IsTerminal(job.state)) return false;
  for (const auto& [id, other] : workers_.workers()) {
    if (other.model.hash == job.spec.model_hash && !other.refused_jobs.contains(job.id)) {
      return false;
    }
  }
  RETURN_IF_ERROR(EndJob(job.id, store::JobState::kFailed, why, job.spec.model_hash));
  return true;
}

StatusOr<bool> Scheduler::DescribeJobData(store::JobId id, const std::string& description) {
  std::lock_guard lock(mu_);
  return jobs_.DescribeData(id, description);
}

Status Scheduler::ReleaseTask(const std::string& worker_id, const LeaseId& lease) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(WorkerState * w, workers_.HeldLease(worker_id, lease));
  return Release(worker_id, *w, lease.key);
}

Status Scheduler::FailJobOfLease(const std::string& worker_id, const LeaseId& lease,
                                 const std::string& why) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(workers_.HeldLease(worker_id, lease).status());
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(lease.key.job));
  return EndJob(job.id, store::JobState::kFailed, why, job.spec.model_hash);
}

Status Scheduler::FailJob(store::JobId id, const std::string& why) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
  return EndJob(id, store::JobState::kFailed, why, job.spec.model_hash);
}

void Scheduler::StoreReopened() {
  std::lock_guard lock(mu_);
  jobs_.ForgetReads();
  StatusOr<std::vector<store::Job>> jobs = store_->ListJobs({.active_only = true});
  if (jobs.ok()) {
    for (const store::Job& job : *jobs) {
      StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
      if (!tasks.ok()) continue;
      for (const store::Task& t : *tasks) {
        if (t.state != store::TaskState::kLeased) continue;
        const WorkerState* owner = workers_.Find(t.lease_owner);
        if (owner != nullptr && owner->leased.contains(t.key)) continue;
        store_->ReleaseLease(t.key, t.lease_owner).IgnoreError();  // ExpireLeases' fallback
      }
    }
  }
  Changed();
}

StatusOr<ExpireOutcome> Scheduler::ExpireLeases() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  ExpireOutcome outcome;
  if (store_->write_failure()) return outcome;
  std::vector<std::string> silent;
  for (const auto& [id, w] : workers_.workers()) {
    if (now - w.last_seen_ms > options_.heartbeat_timeout_ms) silent.push_back(id);
  }
  for (const std::string& id : silent) {
    for (const auto& [key, lease] : workers_.Find(id)->leased) outcome.released.push_back(key);
    RETURN_IF_ERROR(DropWorker(id, absl::StrCat("worker ", id, " went silent")));
    metrics_.workers_lost.Add();
    outcome.dropped_workers.push_back(id);
  }
  // Every lease in the store is in memory (a worker's, or completing): expiry reads no tasks.
  struct Expired {
    std::string worker_id;
    store::TaskKey key;
    Lease lease;
    bool completing = false;  // its results were submitted; their write failed or is slow
  };
  std::vector<Expired> expired;
  for (const auto& [id, w] : workers_.workers()) {
    for (const auto& [key, lease] : w.leased) {
      if (lease.lease_deadline_ms <= now) expired.push_back({id, key, lease});
    }
  }
  for (const auto& [key, c] : results_.completing()) {
    if (c.lease.lease_deadline_ms <= now) expired.push_back({c.worker_id, key, c.lease, true});
  }
  for (const Expired& e : expired) {
    if (e.completing) {
      results_.EraseCompleting(e.key);
    } else if (WorkerState* w = workers_.Find(e.worker_id); w != nullptr) {
      w->leased.erase(e.key);
    }
    StatusOr<store::Task> t = store_->ReleaseLease(e.key, e.worker_id);
    if (LeaseGone(t.status())) continue;  // done or released meanwhile
    RETURN_IF_ERROR(t.status());
    Changed();
    jobs_.MarkPending(e.key);
    metrics_.lease_expiries.Add();
    outcome.released.push_back(e.key);
    const bool at_task_deadline = e.lease.task_deadline_ms <= now;
    const std::string why =
        e.completing
            ? absl::StrCat("the results of worker ", e.worker_id, " were not written in time")
            : absl::StrCat(
                  "worker ", e.worker_id,
                  at_task_deadline ? " passed the task deadline" : " stopped renewing its lease");
    if (!e.completing) {
      outbox_.Append(Revocation{.worker_id = e.worker_id,
                                .lease = {.key = e.key, .attempt = e.lease.attempt},
                                .reason = why});
    }
    // A completion whose write was slow is the store's doing, not the worker's.
    RETURN_IF_ERROR(CountFailure(e.key, e.worker_id, why, /*charge=*/!e.completing));
  }
  std::sort(outcome.released.begin(), outcome.released.end());
  RETURN_IF_ERROR(TickFaults(now));
  RETURN_IF_ERROR(ExpirePendingJobs(now));
  RETURN_IF_ERROR(FinishReadyJobs(outcome));
  return outcome;
}

Status Scheduler::ExpirePendingJobs(int64_t now) {
  ASSIGN_OR_RETURN(const std::vector<store::Job> expired, jobs_.ExpiredPending(now));
  for (const store::Job& job : expired) {
    const std::string why = absl::StrFormat(
        "still pending %.0f s after submission, past the pending-job expiry of %.0f s (the "
        "scheduler's --pending-job-ttl-ms): no worker of model %s took a task",
        static_cast<double>(now - job.created_at_ms) / 1000.0,
        static_cast<double>(options_.pending_job_ttl_ms) / 1000.0, job.spec.model_hash);
    // A job that started (or ended) meanwhile is not pending any more: nothing to do.
    Status s = EndJob(job.id, store::JobState::kFailed, why, job.spec.model_hash);
    if (absl::IsFailedPrecondition(s)) continue;
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

Status Scheduler::TickFaults(int64_t now) {
  const int lifted = workers_.LiftExpired(now);
  if (lifted > 0) {
    metrics_.workers_quarantined.Add(-lifted);
    Changed();
  }
  // Held first runs that nobody could verify within the wait complete unverified.
  std::vector<store::TaskKey> lonely;
  for (const auto& [key, worker_id] : results_.Waited(now)) {
    const store::Job* job = jobs_.ActiveJob(key.job);
    const PendingSet* pending = jobs_.LoadedPending(key.job);
    if (job == nullptr || pending == nullptr || !pending->contains(key)) continue;
    if (!workers_.OtherEligible(worker_id, job->spec.model_hash, key, now, results_)) {
      lonely.push_back(key);
    }
  }
  for (const store::TaskKey& key : lonely) CommitHeld(key, results_.TakeUnverified(key));
  if (options_.faults.job_wait_ms <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<store::Job> * active, jobs_.Active());
  std::vector<std::pair<store::Job, std::string>> stalled;
  for (const store::Job& job : *active) {
    const Waiting waiting = WaitingReason(job);
    if (!waiting.fault) {
      jobs_.NotStalled(job.id);
      continue;
    }
    if (jobs_.StalledFor(job.id, now) > options_.faults.job_wait_ms) {
      stalled.push_back({job, waiting.reason});
    }
  }
  for (const auto& [job, reason] : stalled) {
    RETURN_IF_ERROR(EndJob(job.id, store::JobState::kFailed,
                           absl::StrCat("no progress for ", options_.faults.job_wait_ms / 1000,
                                        " s: ", reason),
                           job.spec.model_hash));
  }
  return absl::OkStatus();
}

Scheduler::Waiting Scheduler::WaitingReason(const store::Job& job) const {
  const PendingSet* pending = jobs_.LoadedPending(job.id);
  if (pending == nullptr || pending->empty()) return {};
  const int64_t now = clock_();
  const std::string& hash = job.spec.model_hash;
  std::vector<const std::pair<const std::string, WorkerState>*> healthy;
  for (const auto& entry : workers_.workers()) {
    const auto& [id, w] = entry;
    if (w.model.hash == hash && !w.refused_jobs.contains(job.id) &&
        !workers_.Quarantined(id, now)) {
      healthy.push_back(&entry);
    }
  }
  if (healthy.empty()) {
    std::vector<std::string> quarantined;
    for (const auto& [id, h] : workers_.health()) {
      if (h.model_hash == hash && h.quarantined_until > now) quarantined.push_back(id);
    }
    if (quarantined.empty()) {
      return {.reason = absl::StrCat("no worker of model ", hash, " is registered")};
    }
    return {.reason = absl::StrCat("no healthy worker of model ", hash, " is registered; ",
                                   quarantined.size(), " quarantined: ",
                                   absl::StrJoin(quarantined, ", ")),
            .fault = true};
  }
  // Progressing while some pending task is not a held run (held runs are few: look at each).
  size_t held = 0;
  const ResultManager::Verification* disputed = nullptr;
  store::TaskKey disputed_key;
  for (const store::TaskKey& key : *pending) {
    const ResultManager::Verification* v = results_.Held(key);
    if (v == nullptr) return {};
    for (const auto* entry : healthy) {
      if (workers_.MayLease(entry->first, entry->second, key, now, results_)) return {};
    }
    ++held;
    if (v->runs.size() >= 2 && disputed == nullptr) {
      disputed = v;
      disputed_key = key;
    }
  }
  if (disputed != nullptr) {
    std::vector<std::string> ids;
    for (const ResultManager::VerifyRun& r : disputed->runs) ids.push_back(r.worker_id);
    return {.reason = absl::StrCat("workers ", absl::StrJoin(ids, " and "), " disagree on ",
                                   TaskName(disputed_key), "; waiting for another worker of model ",
                                   hash, " to decide"),
            .fault = true};
  }
  return {.reason = absl::StrCat(held, " tasks await verification by a second worker (without "
                                       "one they complete unverified after ",
                                 options_.faults.verify_wait_ms / 1000, " s)")};
}

StatusOr<CancelOutcome> Scheduler::CancelJob(store::JobId id, const std::string& reason) {
  std::lock_guard lock(mu_);
  CancelOutcome outcome;
  // Every state change goes through this class under mu_, so the state read here is the one
  // UpdateJobState sees.
  ASSIGN_OR_RETURN(outcome.job, store_->GetJobMeta(id));
  if (outcome.job.state == store::JobState::kCancelled) {
    outcome.already_cancelled = true;
    outcome.job.spec.data_inline.clear();
    return outcome;
  }
  const std::string why = reason.empty() ? "cancelled" : reason;
  std::vector<Revocation> revocations;
  for (const auto& [worker_id, w] : workers_.workers()) {
    for (const auto& [key, lease] : w.leased) {
      if (key.job == id) {
        revocations.push_back(
            {.worker_id = worker_id, .lease = {key, lease.attempt}, .reason = why});
      }
    }
  }
  RETURN_IF_ERROR(EndJob(id, store::JobState::kCancelled, why, outcome.job.spec.model_hash,
                         std::move(revocations)));
  ASSIGN_OR_RETURN(outcome.job, store_->GetJobMeta(id));
  outcome.job.spec.data_inline.clear();
  return outcome;
}

StatusOr<JobProgress> Scheduler::Progress(store::JobId id) {
  std::lock_guard lock(mu_);
  JobProgress progress;
  ASSIGN_OR_RETURN(progress.job, store_->GetJobMeta(id));
  progress.job.spec.data_inline.clear();
  if (!store::IsTerminal(progress.job.state)) {
    // Leased = neither done nor pending: the index answers without a scan.
    ASSIGN_OR_RETURN(PendingSet * pending, jobs_.Pending(id));
    progress.tasks_leased = progress.job.tasks_total - progress.job.tasks_done - pending->size();
  }
  if (!store::IsTerminal(progress.job.state)) {
    progress.waiting_reason = WaitingReason(progress.job).reason;
  }
  results_.FillProgress(progress);
  jobs_.FillRate(progress);
  return progress;
}

StatusOr<store::JobSpec> Scheduler::JobData(const std::string& worker_id, store::JobId id) const {
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
  if (store::IsTerminal(job.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(store::JobStateName(job.state))));
  }
  std::lock_guard lock(mu_);
  auto it = workers_.workers().find(worker_id);
  if (it == workers_.workers().end()) return workers_.UnknownWorker(worker_id);
  auto lease = it->second.leased.lower_bound(store::TaskKey{id, 0, 0});
  if (lease == it->second.leased.end() || lease->first.job != id) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker ", worker_id, " holds no task of job ", id));
  }
  ASSIGN_OR_RETURN(job, store_->GetJob(id));  // with the inline data
  return std::move(job.spec);
}

StatusOr<JobPage> Scheduler::ListJobs(const JobFilter& filter) const {
  return catalog_.ListJobs(filter);
}

StatusOr<TaskPage> Scheduler::ListTasks(store::JobId id, const PageRequest& page) const {
  return catalog_.ListTasks(id, page);
}

StatusOr<StoredProfile> Scheduler::GetProfile(const std::string& model_hash,
                                              uint32_t version) const {
  return catalog_.GetProfile(model_hash, version);
}

StatusOr<ProfilePage> Scheduler::ListProfiles(const std::string& model_hash,
                                              const PageRequest& page) const {
  return catalog_.ListProfiles(model_hash, page);
}

StatusOr<ProfileBudgetMap> Scheduler::GetBudgetMap(const std::string& model_hash, uint32_t version,
                                                   const method::BudgetOptions& options) const {
  return catalog_.GetBudgetMap(model_hash, version, options);
}

std::vector<std::string> Scheduler::Workers() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, w] : workers_.workers()) ids.push_back(id);
  return ids;
}

StatusOr<WorkerPage> Scheduler::ListWorkers(const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  std::lock_guard lock(mu_);
  const std::map<std::string, WorkerInfo> all = workers_.Infos(clock_());
  ASSIGN_OR_RETURN(PageRange range, Page(page, all.size()));
  WorkerPage out;
  auto it = all.begin();
  std::advance(it, static_cast<ptrdiff_t>(range.begin));
  for (size_t i = range.begin; i < range.end; ++i, ++it) out.workers.push_back(it->second);
  out.next_page_token = NextPageToken(range, all.size());
  return out;
}

StatusOr<std::string> Scheduler::LiftQuarantine(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(std::string reason, workers_.Lift(worker_id, clock_()));
  metrics_.workers_quarantined.Add(-1);
  Changed();
  return reason;
}

}  // namespace ripplekv::scheduler
