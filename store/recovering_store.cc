#include "store/recovering_store.h"

#include <sys/statvfs.h>

#include <mutex>
#include <utility>

#include "base/strings.h"

namespace ripplekv::store {
namespace {

Status NotOpen() {
  return absl::UnavailableError(
      "the scheduler's database is being reopened after a write failure; try again shortly");
}

// Free bytes for an unprivileged writer on the file system holding `path`.
StatusOr<uint64_t> FreeBytes(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) {
    return absl::UnavailableError(Cat("cannot read the free space of the database's disk"));
  }
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace

StatusOr<std::unique_ptr<RecoveringStore>> RecoveringStore::Open(RecoveringStoreOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Store> inner, OpenStore(options.path, options.store));
  if (options.min_free_bytes == 0) options.min_free_bytes = options.store.memtable_bytes / 4;
  return std::unique_ptr<RecoveringStore>(
      new RecoveringStore(std::move(options), std::move(inner)));
}

RecoveringStore::RecoveringStore(RecoveringStoreOptions options, std::unique_ptr<Store> inner)
    : options_(std::move(options)),
      recovered_leases_(inner->RecoveredLeases()),
      inner_(std::move(inner)) {}

Status RecoveringStore::TryRecover() {
  {
    std::shared_lock lock(mu_);
    if (inner_ != nullptr && !inner_->write_failure()) return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const uint64_t free, FreeBytes(options_.path));
  if (free < options_.min_free_bytes) {
    return absl::ResourceExhaustedError(Cat("the database's disk has ", free,
                                            " bytes free; reopening waits for ",
                                            options_.min_free_bytes));
  }
  std::unique_lock lock(mu_);
  if (inner_ != nullptr && !inner_->write_failure()) return absl::OkStatus();
  inner_.reset();  // closes the database: its log writer is past saving
  StoreOptions reopen = options_.store;
  reopen.release_leases_on_open = false;
  ASSIGN_OR_RETURN(inner_, OpenStore(options_.path, reopen));
  ++reopens_;
  return absl::OkStatus();
}

uint64_t RecoveringStore::reopens() const {
  std::shared_lock lock(mu_);
  return reopens_;
}

uint64_t RecoveringStore::RecoveredLeases() const { return recovered_leases_; }

std::optional<WriteFailure> RecoveringStore::write_failure() const {
  std::shared_lock lock(mu_);
  if (inner_ == nullptr) return WriteFailure{.status = NotOpen(), .detail = "reopening"};
  return inner_->write_failure();
}

std::vector<std::string> RecoveringStore::RecoveryNotes() const {
  std::shared_lock lock(mu_);
  return inner_ == nullptr ? std::vector<std::string>() : inner_->RecoveryNotes();
}

template <typename Call>
auto RecoveringStore::With(Call&& call) const -> decltype(call(std::declval<Store&>())) {
  std::shared_lock lock(mu_);
  if (inner_ == nullptr) return NotOpen();
  return call(*inner_);
}

StatusOr<CreateJobOutcome> RecoveringStore::CreateJob(const JobSpec& spec,
                                                      std::span<const PlannedTask> tasks) {
  return With([&](Store& s) { return s.CreateJob(spec, tasks); });
}
StatusOr<Job> RecoveringStore::GetJob(JobId id) const {
  return With([&](Store& s) { return s.GetJob(id); });
}
StatusOr<Job> RecoveringStore::GetJobMeta(JobId id) const {
  return With([&](Store& s) { return s.GetJobMeta(id); });
}
StatusOr<std::vector<Job>> RecoveringStore::ListJobs(const ListJobsOptions& options) const {
  return With([&](Store& s) { return s.ListJobs(options); });
}
StatusOr<Job> RecoveringStore::UpdateJobState(JobId id, JobState state, const std::string& error) {
  return With([&](Store& s) { return s.UpdateJobState(id, state, error); });
}
StatusOr<Job> RecoveringStore::SetDataDescription(JobId id, std::string_view description) {
  return With([&](Store& s) { return s.SetDataDescription(id, description); });
}
StatusOr<Job> RecoveringStore::ExtendJob(JobId id, uint32_t samples_planned,
                                         std::span<const PlannedTask> tasks) {
  return With([&](Store& s) { return s.ExtendJob(id, samples_planned, tasks); });
}

StatusOr<Task> RecoveringStore::GetTask(const TaskKey& key) const {
  return With([&](Store& s) { return s.GetTask(key); });
}
StatusOr<std::vector<Task>> RecoveringStore::ListTasks(JobId job) const {
  return With([&](Store& s) { return s.ListTasks(job); });
}
StatusOr<Task> RecoveringStore::LeaseTask(const TaskKey& key, const std::string& worker_id,
                                          TimeMs deadline_ms) {
  return With([&](Store& s) { return s.LeaseTask(key, worker_id, deadline_ms); });
}
StatusOr<Task> RecoveringStore::ExtendLease(const TaskKey& key, const std::string& worker_id,
                                            TimeMs deadline_ms) {
  return With([&](Store& s) { return s.ExtendLease(key, worker_id, deadline_ms); });
}
StatusOr<Task> RecoveringStore::ReleaseLease(const TaskKey& key, const std::string& worker_id) {
  return With([&](Store& s) { return s.ReleaseLease(key, worker_id); });
}
StatusOr<std::vector<TaskKey>> RecoveringStore::ReleaseExpiredLeases(TimeMs now_ms) {
  return With([&](Store& s) { return s.ReleaseExpiredLeases(now_ms); });
}
StatusOr<std::vector<TaskKey>> RecoveringStore::ReopenTasks(JobId job,
                                                            std::span<const TaskKey> keys) {
  return With([&](Store& s) { return s.ReopenTasks(job, keys); });
}

StatusOr<ResultWriteOutcome> RecoveringStore::PutResults(std::span<const TrialResult> results) {
  return With([&](Store& s) { return s.PutResults(results); });
}
StatusOr<ResultWriteOutcome> RecoveringStore::CompleteTask(const TaskKey& key,
                                                           std::span<const TrialResult> results) {
  return With([&](Store& s) { return s.CompleteTask(key, results); });
}
std::vector<StatusOr<ResultWriteOutcome>> RecoveringStore::CompleteTasks(
    std::span<const Completion> completions) {
  std::shared_lock lock(mu_);
  if (inner_ == nullptr) {
    return std::vector<StatusOr<ResultWriteOutcome>>(completions.size(), NotOpen());
  }
  return inner_->CompleteTasks(completions);
}
StatusOr<std::vector<TrialResult>> RecoveringStore::ListResults(JobId job) const {
  return With([&](Store& s) { return s.ListResults(job); });
}
StatusOr<std::vector<TrialResult>> RecoveringStore::ListTaskResults(const TaskKey& key) const {
  return With([&](Store& s) { return s.ListTaskResults(key); });
}
StatusOr<uint64_t> RecoveringStore::CountResults(JobId job) const {
  return With([&](Store& s) { return s.CountResults(job); });
}

StatusOr<ProfileVersion> RecoveringStore::PutProfileVersion(const std::string& model_hash,
                                                            const std::string& profile_json,
                                                            JobId job) {
  return With([&](Store& s) { return s.PutProfileVersion(model_hash, profile_json, job); });
}
StatusOr<ProfileVersion> RecoveringStore::GetProfile(const std::string& model_hash,
                                                     uint32_t version) const {
  return With([&](Store& s) { return s.GetProfile(model_hash, version); });
}
StatusOr<std::vector<ProfileVersion>> RecoveringStore::ListProfiles(
    const std::string& model_hash) const {
  return With([&](Store& s) { return s.ListProfiles(model_hash); });
}
StatusOr<BudgetMapPut> RecoveringStore::PutBudgetMap(const std::string& model_hash,
                                                     uint32_t profile_version,
                                                     const std::string& budget_json) {
  return With([&](Store& s) { return s.PutBudgetMap(model_hash, profile_version, budget_json); });
}
StatusOr<BudgetMapRecord> RecoveringStore::GetBudgetMap(const std::string& model_hash,
                                                        uint32_t version) const {
  return With([&](Store& s) { return s.GetBudgetMap(model_hash, version); });
}
StatusOr<BudgetMapRecord> RecoveringStore::GetBudgetMapByDigest(const std::string& model_hash,
                                                                const std::string& digest) const {
  return With([&](Store& s) { return s.GetBudgetMapByDigest(model_hash, digest); });
}
StatusOr<std::vector<BudgetMapRecord>> RecoveringStore::ListBudgetMaps(
    const std::string& model_hash) const {
  return With([&](Store& s) { return s.ListBudgetMaps(model_hash); });
}

StatusOr<RolloutRecord> RecoveringStore::CreateRollout(const RolloutRecord& rollout) {
  return With([&](Store& s) { return s.CreateRollout(rollout); });
}
Status RecoveringStore::WriteRollout(uint64_t id, const RolloutRecord* rollout,
                                     std::span<const RolloutNodeRecord> nodes, bool sync) {
  return With([&](Store& s) { return s.WriteRollout(id, rollout, nodes, sync); });
}
StatusOr<RolloutRecord> RecoveringStore::GetRollout(uint64_t id) const {
  return With([&](Store& s) { return s.GetRollout(id); });
}
StatusOr<std::vector<RolloutRecord>> RecoveringStore::ListRollouts() const {
  return With([&](Store& s) { return s.ListRollouts(); });
}
StatusOr<std::vector<RolloutNodeRecord>> RecoveringStore::ListRolloutNodes(uint64_t id) const {
  return With([&](Store& s) { return s.ListRolloutNodes(id); });
}

StatusOr<std::string> RecoveringStore::PutModelSummary(const std::string& model_hash,
                                                       const std::string& summary_json) {
  return With([&](Store& s) { return s.PutModelSummary(model_hash, summary_json); });
}
StatusOr<std::vector<std::pair<std::string, std::string>>> RecoveringStore::ListModelSummaries()
    const {
  return With([&](Store& s) { return s.ListModelSummaries(); });
}
StatusOr<PurgeOutcome> RecoveringStore::PurgeFinishedJobs(TimeMs finished_before_ms,
                                                          size_t max_jobs) {
  return With([&](Store& s) { return s.PurgeFinishedJobs(finished_before_ms, max_jobs); });
}
StatusOr<CheckpointInfo> RecoveringStore::Checkpoint(const std::string& dir) {
  return With([&](Store& s) { return s.Checkpoint(dir); });
}

}  // namespace ripplekv::store
