#include "scheduler/core/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/strings.h"
#include "method/calibration_sets.h"
#include "scheduler/core/job_plan.h"

namespace ripplekv::scheduler {

int64_t DeriveTaskDeadlineMs(const method::CalibrationParams& params, const method::ProfileModel& model) {
  constexpr double kBaseMs = 5 * 60 * 1000.0;
  constexpr double kSlowestFlops = 1e10;
  const double tokens = static_cast<double>(params.context_len) +
                        static_cast<double>(params.trials) * static_cast<double>(params.probe_len);
  const double d = static_cast<double>(model.d_model);
  const double flops = tokens * 24.0 * d * d * static_cast<double>(model.n_layers);
  const double ms = kBaseMs + flops / kSlowestFlops * 1000.0;
  return ms >= 1e15 ? static_cast<int64_t>(1e15) : static_cast<int64_t>(ms);
}

std::string_view DataDomainOf(const store::Job& job) {
  const store::JobSpec& spec = job.spec;
  // The job record read without its data (GetJobMeta) still has data_inline_bytes.
  if (job.data_inline_bytes > 0 || !spec.data_inline.empty() || !spec.data_path.empty()) {
    return method::kDomainUser;
  }
  return method::BuiltinSetDomain(spec.data_builtin.empty() ? method::kDefaultCalibrationSet
                                                            : spec.data_builtin)
      .value_or("");
}

std::string DescribeDataSource(const store::Job& job) {
  const store::JobSpec& spec = job.spec;
  const uint64_t inline_bytes = std::max<uint64_t>(job.data_inline_bytes, spec.data_inline.size());
  if (inline_bytes > 0) return absl::StrCat("inline data, ", inline_bytes, " bytes");
  if (!spec.data_path.empty()) return absl::StrCat("file ", spec.data_path);
  return "built-in calibration text";
}

JobManager::JobManager(store::Store* store, const SchedulerOptions& options)
    : store_(store), options_(options) {}

StatusOr<std::vector<store::Job>*> JobManager::Active() {
  if (!active_) {
    ASSIGN_OR_RETURN(active_, store_->ListJobs({.active_only = true}));
  }
  return &*active_;
}

const store::Job* JobManager::ActiveJob(store::JobId id) {
  if (!active_) {
    StatusOr<std::vector<store::Job>> jobs = store_->ListJobs({.active_only = true});
    if (!jobs.ok()) return nullptr;
    active_ = *std::move(jobs);
  }
  for (const store::Job& job : *active_) {
    if (job.id == id) return &job;
  }
  return nullptr;
}

void JobManager::ForgetReads() {
  active_.reset();
  pending_.clear();
}

StatusOr<PendingSet*> JobManager::Pending(store::JobId job) {
  auto it = pending_.find(job);
  if (it != pending_.end()) return &it->second;
  ASSIGN_OR_RETURN(std::vector<store::Task> tasks, store_->ListTasks(job));
  PendingSet pending;
  for (const store::Task& t : tasks) {
    if (t.state == store::TaskState::kPending) pending.insert(pending.end(), t.key);
  }
  return &pending_.emplace(job, std::move(pending)).first->second;
}

const PendingSet* JobManager::LoadedPending(store::JobId job) const {
  auto it = pending_.find(job);
  return it == pending_.end() ? nullptr : &it->second;
}

void JobManager::MarkPending(const store::TaskKey& key) {
  auto it = pending_.find(key.job);
  if (it != pending_.end()) it->second.insert(key);
}

void JobManager::Unpend(const store::TaskKey& key) {
  if (auto p = pending_.find(key.job); p != pending_.end()) p->second.erase(key);
}

Status JobManager::CheckLimits(const store::JobSpec& spec, int64_t n_layers) {
  const uint64_t n_layers_used =
      spec.params.layers.empty() ? static_cast<uint64_t>(n_layers) : spec.params.layers.size();
  // An until_stable job is checked at its cap, so no later round can pass a limit.
  const uint64_t samples = MaxJobSamples(spec.params);
  const std::string_view samples_field =
      spec.params.until_stable ? "params.max_samples" : "params.samples";
  if (samples * n_layers_used > options_.max_tasks_per_job) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec field ", Sv(samples_field), ": ", samples, " samples x ", n_layers_used,
        " layers exceeds the limit of ", options_.max_tasks_per_job, " tasks"));
  }
  const uint64_t trials_total = samples * n_layers_used * spec.params.trials;
  if (trials_total > options_.max_trials_per_job) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job spec field params.trials: ", samples, " samples x ", n_layers_used,
                     " layers x ", spec.params.trials, " trials exceeds the limit of ",
                     options_.max_trials_per_job, " trials per job"));
  }
  if (options_.max_pending_inline_bytes > 0 && !spec.data_inline.empty()) {
    ASSIGN_OR_RETURN(const uint64_t pending, PendingInlineBytes());
    const uint64_t cap = options_.max_pending_inline_bytes;
    if (pending + spec.data_inline.size() > cap) {
      constexpr double kMiB = 1024.0 * 1024.0;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "pending jobs hold %.1f MiB of inline calibration data; this job's %.1f MiB would pass "
          "the cap of %.1f MiB (the scheduler's --max-pending-inline-mib): retry once jobs have "
          "started, or give the data as a path",
          static_cast<double>(pending) / kMiB, static_cast<double>(spec.data_inline.size()) / kMiB,
          static_cast<double>(cap) / kMiB));
    }
  }
  return absl::OkStatus();
}

StatusOr<uint64_t> JobManager::PendingInlineBytes() {
  ASSIGN_OR_RETURN(std::vector<store::Job> * active, Active());
  uint64_t bytes = 0;
  for (const store::Job& job : *active) {
    if (job.state == store::JobState::kPending) bytes += job.data_inline_bytes;
  }
  return bytes;
}

StatusOr<store::CreateJobOutcome> JobManager::Create(const store::JobSpec& spec, int64_t n_layers) {
  const std::vector<store::PlannedTask> tasks = PlanTasks(spec, n_layers);
  // The store decides `created` in the write that creates the job (its writes are serialized),
  // so no separate lookup of the idempotency key can race another submit.
  ASSIGN_OR_RETURN(store::CreateJobOutcome outcome, store_->CreateJob(spec, tasks));
  active_.reset();
  return outcome;
}

StatusOr<uint32_t> JobManager::BeginRound(const store::Job& job, int64_t n_layers,
                                          uint32_t samples_planned) {
  const std::vector<store::PlannedTask> tasks =
      PlanRound(job.spec, n_layers, job.samples_planned, samples_planned);
  ASSIGN_OR_RETURN(store::Job extended, store_->ExtendJob(job.id, samples_planned, tasks));
  // The new tasks are leasable at once: into the index (when loaded; else it loads them), and the
  // job record NextTask reads carries the new samples_planned.
  if (auto it = pending_.find(job.id); it != pending_.end()) {
    for (const store::PlannedTask& t : tasks) {
      it->second.insert(store::TaskKey{job.id, t.sample, t.layer});
    }
  }
  active_.reset();
  // The store cleared the description, which names the sample count: the round reports anew.
  data_descriptions_.erase(job.id);
  unprofiled_.erase(job.id);
  return extended.samples_planned;
}

StatusOr<std::vector<store::Job>> JobManager::ExpiredPending(int64_t now) {
  std::vector<store::Job> expired;
  if (options_.pending_job_ttl_ms <= 0) return expired;
  ASSIGN_OR_RETURN(std::vector<store::Job> * active, Active());
  for (const store::Job& job : *active) {
    if (job.state == store::JobState::kPending &&
        now - job.created_at_ms > options_.pending_job_ttl_ms) {
      expired.push_back(job);
    }
  }
  return expired;
}

int64_t JobManager::TaskDeadline(const store::JobSpec& spec, const method::ProfileModel& model,
                                 int64_t now) const {
  const int64_t budget = options_.task_deadline_ms > 0 ? options_.task_deadline_ms
                                                       : DeriveTaskDeadlineMs(spec.params, model);
  return now + budget;
}

StatusOr<std::vector<store::JobId>> JobManager::Unprofiled() {
  if (!checked_unprofiled_) {
    ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs({.active_only = true}));
    for (const store::Job& job : jobs) unprofiled_.insert(job.id);
    checked_unprofiled_ = true;
  }
  return std::vector<store::JobId>(unprofiled_.begin(), unprofiled_.end());
}

int64_t JobManager::StalledFor(store::JobId id, int64_t now) {
  return now - stalled_since_.try_emplace(id, now).first->second;
}

void JobManager::ObserveProgress(const store::Job& job, int64_t now) {
  auto [it, inserted] = rates_.try_emplace(job.id);
  if (inserted) {
    it->second.first_ms = now;
    it->second.first_done = job.tasks_done;
  }
  it->second.last_ms = now;
  it->second.last_done = job.tasks_done;
}

void JobManager::FillRate(JobProgress& progress) const {
  auto it = rates_.find(progress.job.id);
  if (it != rates_.end() && it->second.last_ms > it->second.first_ms &&
      it->second.last_done > it->second.first_done) {
    const RateObservation& r = it->second;
    progress.tasks_per_second = static_cast<double>(r.last_done - r.first_done) * 1000.0 /
                                static_cast<double>(r.last_ms - r.first_ms);
    const uint64_t remaining = progress.job.tasks_total - progress.job.tasks_done;
    progress.eta_ms =
        static_cast<int64_t>(static_cast<double>(remaining) * 1000.0 / progress.tasks_per_second);
  }
}

StatusOr<bool> JobManager::DescribeData(store::JobId id, const std::string& description) {
  // Every TaskDone carries the description; only the job's first one needs the store.
  if (auto known = data_descriptions_.find(id); known != data_descriptions_.end()) {
    return known->second == description;
  }
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
  if (store::IsTerminal(job.state)) return true;
  if (job.data_description.empty()) {
    ASSIGN_OR_RETURN(job, store_->SetDataDescription(id, description));
  }
  data_descriptions_.emplace(id, job.data_description);
  return job.data_description == description;
}

void JobManager::Forget(store::JobId id) {
  active_.reset();
  rates_.erase(id);
  pending_.erase(id);
  data_descriptions_.erase(id);
  unprofiled_.erase(id);
  stalled_since_.erase(id);
}

}  // namespace ripplekv::scheduler
