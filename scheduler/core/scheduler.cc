#include "scheduler/core/scheduler.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <optional>
#include <random>
#include <type_traits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/strings.h"
#include "method/calibration_sets.h"
#include "method/profile_aggregate.h"
#include "method/profile_stability.h"
#include "scheduler/core/job_plan.h"

namespace ripplekv::scheduler {
namespace {

bool SameModel(const method::ProfileModel& a, const method::ProfileModel& b) {
  return a.hash == b.hash && a.architecture == b.architecture && a.name == b.name &&
         a.n_layers == b.n_layers && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
         a.d_model == b.d_model && a.vocab_size == b.vocab_size;
}

// The (key, count) of `counts` with the largest count when exactly one key has it; nullopt when
// `counts` is empty or the largest count is tied. `counts`: a range of (key, count) pairs.
template <typename Counts>
auto UniqueMost(const Counts& counts)
    -> std::optional<std::pair<std::decay_t<decltype(counts.begin()->first)>, int>> {
  std::optional<std::pair<std::decay_t<decltype(counts.begin()->first)>, int>> best;
  bool tied = false;
  for (const auto& [key, count] : counts) {
    if (!best || count > best->second) {
      best.emplace(key, count);
      tied = false;
    } else if (count == best->second) {
      tied = true;
    }
  }
  if (tied) return std::nullopt;
  return best;
}

std::string Quoted(std::string_view text) {
  constexpr size_t kMaxBytes = 96;
  std::string out = absl::StrCat(
      "\"", absl::CEscape(absl::string_view(text.data(), std::min(text.size(), kMaxBytes))), "\"");
  if (text.size() > kMaxBytes) out += "...";
  return out;
}

// Each field where `reported` differs from `recorded`, with both values: `name: "x" (recorded
// "y"), n_layers: 31 (recorded 30)`.
std::string ModelDifferences(const method::ProfileModel& reported,
                             const method::ProfileModel& recorded) {
  std::vector<std::string> fields;
  auto text = [&](std::string_view field, const std::string& a, const std::string& b) {
    if (a != b)
      fields.push_back(absl::StrCat(Sv(field), ": ", Quoted(a), " (recorded ", Quoted(b), ")"));
  };
  auto count = [&](std::string_view field, int64_t a, int64_t b) {
    if (a != b) fields.push_back(absl::StrCat(Sv(field), ": ", a, " (recorded ", b, ")"));
  };
  text("architecture", reported.architecture, recorded.architecture);
  text("name", reported.name, recorded.name);
  count("n_layers", reported.n_layers, recorded.n_layers);
  count("n_kv_heads", reported.n_kv_heads, recorded.n_kv_heads);
  count("head_dim", reported.head_dim, recorded.head_dim);
  count("d_model", reported.d_model, recorded.d_model);
  count("vocab_size", reported.vocab_size, recorded.vocab_size);
  return absl::StrJoin(fields, ", ");
}

Status ValidateModel(const method::ProfileModel& m) {
  auto bad = [](std::string_view field, int64_t v) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker registration field model.", Sv(field), ": must be > 0, got ", v));
  };
  if (m.hash.empty())
    return absl::InvalidArgumentError("worker registration field model.hash: is required");
  if (m.n_layers <= 0) return bad("n_layers", m.n_layers);
  if (m.n_kv_heads <= 0) return bad("n_kv_heads", m.n_kv_heads);
  if (m.head_dim <= 0) return bad("head_dim", m.head_dim);
  if (m.d_model <= 0) return bad("d_model", m.d_model);
  if (m.vocab_size <= 0) return bad("vocab_size", m.vocab_size);
  return absl::OkStatus();
}

// A lease that is gone already (done, expired and re-leased): not an error for the caller.
bool LeaseGone(const Status& s) { return absl::IsFailedPrecondition(s) || absl::IsNotFound(s); }

std::string TaskName(const store::TaskKey& key) {
  return absl::StrCat("task (job ", key.job, ", sample ", key.sample, ", layer ", key.layer, ")");
}

StatusOr<StoredProfile> ParseStoredProfile(store::ProfileVersion record) {
  StatusOr<method::SensitivityProfile> profile = method::ProfileFromJson(record.profile_json);
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile ", record.model_hash, " version ",
                                            record.version, ": ", profile.status().message()));
  }
  return StoredProfile{.model_hash = std::move(record.model_hash),
                       .version = record.version,
                       .job = record.job,
                       .created_at_ms = record.created_at_ms,
                       .profile = *std::move(profile)};
}

}  // namespace

StatusOr<PageRange> Page(const PageRequest& page, size_t total) {
  if (page.page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", page.page_size, " is negative"));
  }
  const size_t size =
      page.page_size == 0 ? kDefaultPageSize : std::min(page.page_size, kMaxPageSize);
  size_t offset = 0;
  for (char c : page.page_token) {
    if (c < '0' || c > '9' || offset > (std::numeric_limits<size_t>::max() - 9) / 10) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_token: \"", page.page_token.substr(0, 80), "\" is not a token of this server"));
    }
    offset = offset * 10 + static_cast<size_t>(c - '0');
  }
  const size_t begin = std::min(offset, total);
  return PageRange{.begin = begin, .end = std::min(total, begin + size)};
}

std::string NextPageToken(const PageRange& range, size_t total) {
  return range.end < total ? absl::StrCat(range.end) : std::string();
}

int64_t DeriveTaskDeadlineMs(const store::MethodParams& params, const method::ProfileModel& model) {
  constexpr double kBaseMs = 5 * 60 * 1000.0;
  constexpr double kSlowestFlops = 1e10;
  const double tokens = static_cast<double>(params.context_len) +
                        static_cast<double>(params.trials) * static_cast<double>(params.probe_len);
  const double d = static_cast<double>(model.d_model);
  const double flops = tokens * 24.0 * d * d * static_cast<double>(model.n_layers);
  const double ms = kBaseMs + flops / kSlowestFlops * 1000.0;
  return ms >= 1e15 ? static_cast<int64_t>(1e15) : static_cast<int64_t>(ms);
}

std::string InvalidTaskResult(const store::TaskKey& key, uint32_t trials,
                              const store::TrialResult& r, bool trial_seen) {
  if (r.job != key.job || r.sample != key.sample || r.layer != key.layer) {
    return absl::StrCat("a result of (job ", r.job, ", sample ", r.sample, ", layer ", r.layer,
                        ") came with ", TaskName(key));
  }
  if (r.trial >= trials) {
    return absl::StrCat("trial ", r.trial, " is out of range (the job has ", trials, " trials)");
  }
  if (trial_seen) return absl::StrCat("trial ", r.trial, " twice");
  if (Status valid = method::CheckTrialKl(r.kl); !valid.ok()) {
    return absl::StrCat("trial ", r.trial, ": ", valid.message());
  }
  return {};
}

namespace {

// SplitMix64's finalizer: a bijection of 64-bit words whose outputs pass as independent.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string_view DeviceClass(std::string_view numerics) {
  return numerics.substr(0, numerics.find('/'));
}

}  // namespace

bool VerificationSelected(uint64_t verify_key, const store::TaskKey& key, double fraction) {
  if (!(fraction > 0)) return false;
  if (fraction >= 1) return true;
  const uint64_t h = Mix(Mix(Mix(verify_key ^ key.job) ^ key.sample) ^ key.layer);
  // The top 53 bits as a uniform double in [0, 1).
  return static_cast<double>(h >> 11) * 0x1.0p-53 < fraction;
}

bool ResultsAgree(std::span<const store::TrialResult> a, std::span<const store::TrialResult> b,
                  bool same_numerics, double rel_tolerance) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i].kl;
    const double y = b[i].kl;
    if (a[i].trial != b[i].trial) return false;
    if (same_numerics) {
      if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y)) return false;
    } else if (!(std::abs(x - y) <= rel_tolerance * std::max(std::abs(x), std::abs(y)) + 1e-12)) {
      return false;
    }
  }
  return true;
}

double NumericsTolerance(std::string_view a, std::string_view b) {
  if (DeviceClass(a) == "cpu-fp32" && DeviceClass(b) == "cpu-fp32") return 1e-2;
  return 5e-2;
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

namespace {

telemetry::MetricsRegistry& RegistryOf(const SchedulerOptions& options,
                                       std::unique_ptr<telemetry::MetricsRegistry>& own) {
  if (options.metrics != nullptr) return *options.metrics;
  own = std::make_unique<telemetry::MetricsRegistry>();
  return *own;
}

// A key no worker can predict (the verification sample must not be guessable).
uint64_t RandomKey() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ 1;
}

telemetry::Counter& JobsFinished(telemetry::MetricsRegistry& registry, const char* state) {
  return registry.GetCounter("ripplekv_scheduler_jobs_finished_total",
                             "Jobs that reached a final state since the scheduler started.",
                             {"state"}, {state});
}

}  // namespace

Scheduler::Metrics::Metrics(telemetry::MetricsRegistry& r)
    : tasks_leased(r.GetCounter("ripplekv_scheduler_tasks_leased_total",
                                "Task leases handed to workers (every attempt).")),
      tasks_completed(r.GetCounter("ripplekv_scheduler_tasks_completed_total",
                                   "Tasks whose results were accepted and stored.")),
      tasks_retried(r.GetCounter("ripplekv_scheduler_tasks_retried_total",
                                 "Failed task attempts put back for another worker (deadline "
                                 "passed, worker lost, invalid results) below max attempts.")),
      lease_expiries(r.GetCounter("ripplekv_scheduler_lease_expiries_total",
                                  "Leases taken back because they expired (no heartbeat "
                                  "renewed them, or the task deadline passed).")),
      workers_lost(r.GetCounter("ripplekv_scheduler_workers_lost_total",
                                "Workers dropped for silence past the heartbeat timeout.")),
      jobs_succeeded(JobsFinished(r, "succeeded")),
      jobs_failed(JobsFinished(r, "failed")),
      jobs_cancelled(JobsFinished(r, "cancelled")),
      result_latency(r.GetHistogram("ripplekv_scheduler_task_result_latency_seconds",
                                    "From a task's lease to its results being stored, seconds.",
                                    telemetry::LatencyBuckets())),
      quarantines(r.GetCounter("ripplekv_scheduler_quarantines_total",
                               "Workers quarantined: repeated failed attempts, or outvoted in a "
                               "verification.")),
      workers_quarantined(r.GetGauge("ripplekv_scheduler_workers_quarantined",
                                     "Worker ids under quarantine now.")),
      tasks_verified(r.GetCounter("ripplekv_scheduler_tasks_verified_total",
                                  "Tasks whose results two distinct workers agreed on.")),
      verification_disagreements(
          r.GetCounter("ripplekv_scheduler_verification_disagreements_total",
                       "Verification runs outvoted by two agreeing workers.")),
      tasks_recomputed(r.GetCounter("ripplekv_scheduler_tasks_recomputed_total",
                                    "Done tasks reopened because their worker was outvoted.")),
      tasks_unverified(r.GetCounter("ripplekv_scheduler_tasks_unverified_total",
                                    "Tasks selected for verification that completed unverified: "
                                    "no second worker registered within the verify wait.")) {}

Scheduler::Scheduler(store::Store* store, SchedulerOptions options, Clock clock)
    : store_(store),
      options_(std::move(options)),
      clock_(std::move(clock)),
      committer_(store),
      metrics_(RegistryOf(options_, own_metrics_)),
      verify_key_(options_.faults.verify_key != 0 ? options_.faults.verify_key : RandomKey()) {}

void Scheduler::NoteEnded(EndedJob ended) {
  switch (ended.state) {
    case store::JobState::kSucceeded:
      metrics_.jobs_succeeded.Add();
      break;
    case store::JobState::kFailed:
      metrics_.jobs_failed.Add();
      break;
    case store::JobState::kCancelled:
      metrics_.jobs_cancelled.Add();
      break;
    default:
      break;
  }
  ended_.push_back(std::move(ended));
  any_ended_.store(true, std::memory_order_release);
}

// The committer's callbacks use this object: they finish before any member goes.
Scheduler::~Scheduler() { StopCompletions(); }

Status Scheduler::LoadModels() {
  if (models_loaded_) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto stored, store_->ListModelSummaries());
  for (const auto& [hash, json] : stored) {
    StatusOr<method::ProfileModel> model = method::ProfileModelFromJson(json);
    if (!model.ok()) {
      return absl::DataLossError(
          absl::StrCat("stored summary of model ", hash, ": ", model.status().message()));
    }
    models_.emplace(hash, *std::move(model));
  }
  models_loaded_ = true;
  return absl::OkStatus();
}

StatusOr<SubmitOutcome> Scheduler::SubmitJob(const SubmitRequest& request) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(LoadModels());
  int64_t n_layers = request.model_n_layers;
  auto known = models_.find(request.spec.model_hash);
  if (n_layers == 0) {
    if (known != models_.end()) {
      n_layers = known->second.n_layers;
    } else {
      // Without a recorded summary: the count most registered workers of the model (with the
      // submitter's name, when given) report, if one count is the most.
      const ModelRef named{.name = request.model_name};
      std::map<int64_t, int> counts;
      for (const auto& [id, w] : workers_) {
        if (w.model.hash == request.spec.model_hash && named.Admits(w.model)) {
          ++counts[w.model.n_layers];
        }
      }
      if (auto most = UniqueMost(counts)) n_layers = most->first;
    }
    if (n_layers == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job spec field model.n_layers: not given, and no registered worker holds model ",
          request.spec.model_hash, " with an agreed layer count"));
    }
  } else if (known != models_.end() && known->second.n_layers != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec field model.n_layers: ", n_layers, ", but workers holding model ",
                     request.spec.model_hash, " report ", known->second.n_layers, " layers"));
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
  const uint64_t n_layers_used = request.spec.params.layers.empty()
                                     ? static_cast<uint64_t>(n_layers)
                                     : request.spec.params.layers.size();
  // An until_stable job is checked at its cap, so no later round can pass a limit.
  const uint64_t samples = MaxJobSamples(request.spec.params);
  const std::string_view samples_field =
      request.spec.params.until_stable ? "params.max_samples" : "params.samples";
  if (samples * n_layers_used > options_.max_tasks_per_job) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec field ", Sv(samples_field), ": ", samples, " samples x ", n_layers_used,
        " layers exceeds the limit of ", options_.max_tasks_per_job, " tasks"));
  }
  const uint64_t trials_total = samples * n_layers_used * request.spec.params.trials;
  if (trials_total > options_.max_trials_per_job) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job spec field params.trials: ", samples, " samples x ", n_layers_used,
                     " layers x ", request.spec.params.trials, " trials exceeds the limit of ",
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
  const std::vector<store::PlannedTask> tasks = PlanTasks(spec, n_layers);
  // The store decides `created` in the write that creates the job (its writes are serialized),
  // so no separate lookup of the idempotency key can race another submit.
  ASSIGN_OR_RETURN(store::CreateJobOutcome outcome, store_->CreateJob(spec, tasks));
  active_jobs_.reset();
  Changed();
  if (outcome.created) {
    const ModelRef ref{.n_layers = n_layers, .name = request.model_name};
    job_refs_.insert_or_assign(outcome.job.id, ref);
    first_refs_.try_emplace(request.spec.model_hash, ref);
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
  RETURN_IF_ERROR(LoadModels());
  const std::string& hash = registration.model.hash;
  auto known = models_.find(hash);
  if (known != models_.end() && !SameModel(known->second, registration.model)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", registration.worker_id, " reports a model summary for hash ", hash,
                     " that differs from the one recorded: ",
                     ModelDifferences(registration.model, known->second)));
  }
  const std::string& id = registration.worker_id;
  const int64_t now = clock_();
  if (Quarantined(id, now)) {
    const WorkerHealth& h = health_.at(id);
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", id, " is quarantined until ",
        method::FormatIso8601Utc(
            std::chrono::system_clock::time_point(std::chrono::milliseconds(h.quarantined_until))),
        ": ", h.quarantine_reason, " (an admin lifts it with `ripplekv admin unquarantine ", id,
        "`)"));
  }
  if (auto held = workers_.find(id); held != workers_.end()) {
    const WorkerState& old = held->second;
    const bool same_process = !registration.instance.empty() && old.instance == registration.instance;
    if (!registration.replace && !same_process &&
        now - old.last_seen_ms < options_.faults.live_session_ms) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker id ", id, " is held by a live session (host ", old.host.empty() ? "?" : old.host,
          ", ", old.version.empty() ? "version not reported" : old.version, ", device ",
          old.device.empty() ? "?" : old.device, ", registered ", (now - old.registered_ms) / 1000,
          " s ago, last heard ", (now - old.last_seen_ms) / 1000,
          " s ago); give each worker its own --id (the default is unique per process), or pass "
          "--replace to take it over"));
    }
    RETURN_IF_ERROR(DropWorker(id, absl::StrCat("worker ", id, " restarted")));
  }
  evicted_.erase(id);
  WorkerState& w = workers_[id];
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
  RETURN_IF_ERROR(RecordModel(hash));
  if (!workers_.contains(registration.worker_id)) {
    // The summary this registration completed is another group's.
    return absl::FailedPreconditionError(evicted_.at(registration.worker_id));
  }
  // Jobs left complete without a profile are finished by the next ExpireLeases tick, never here:
  // a failing aggregation or store write must not fail a registration.
  return absl::OkStatus();
}

const Scheduler::ModelRef& Scheduler::JobRef(const store::Job& job) {
  auto it = job_refs_.find(job.id);
  if (it != job_refs_.end()) return it->second;
  // Submitted before a restart: the name was not stored; the layer count is in the plan.
  ModelRef ref;
  if (job.spec.params.layers.empty() && job.samples_planned > 0) {
    ref.n_layers = static_cast<int64_t>(job.tasks_total / job.samples_planned);
  }
  return job_refs_.emplace(job.id, std::move(ref)).first->second;
}

Status Scheduler::RecordModel(const std::string& hash) {
  if (models_.contains(hash)) return absl::OkStatus();
  auto ref = first_refs_.find(hash);
  if (ref == first_refs_.end()) {
    // After a restart: the oldest active job of the model, if any, stands for its first job.
    if (!active_jobs_) {
      ASSIGN_OR_RETURN(active_jobs_, store_->ListJobs({.active_only = true}));
    }
    const store::Job* oldest = nullptr;
    for (const store::Job& job : *active_jobs_) {
      if (job.spec.model_hash == hash && (oldest == nullptr || job.id < oldest->id)) oldest = &job;
    }
    if (oldest != nullptr) ref = first_refs_.emplace(hash, JobRef(*oldest)).first;
  }
  const bool has_ref = ref != first_refs_.end();
  // Identical summaries among the candidates, with how many workers report each.
  std::vector<std::pair<const method::ProfileModel*, int>> groups;
  for (const auto& [id, w] : workers_) {
    if (w.model.hash != hash || (has_ref && !ref->second.Admits(w.model))) continue;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& group) { return SameModel(*group.first, w.model); });
    if (g == groups.end()) {
      groups.push_back({&w.model, 1});
    } else {
      ++g->second;
    }
  }
  // With a job's ModelRef one agreeing worker suffices; without one, two must agree. A tie waits
  // for a worker or a job that decides it.
  const int needed = has_ref ? 1 : 2;
  const auto most = UniqueMost(groups);
  if (!most || most->second < needed) return absl::OkStatus();
  const method::ProfileModel recorded = *most->first;
  RETURN_IF_ERROR(store_->PutModelSummary(hash, method::ProfileModelToJson(recorded)).status());
  models_.emplace(hash, recorded);
  first_refs_.erase(hash);
  std::vector<std::pair<std::string, std::string>> differing;
  for (const auto& [id, w] : workers_) {
    if (w.model.hash == hash && !SameModel(w.model, recorded)) {
      differing.push_back(
          {id,
           absl::StrCat("worker ", id, " was dropped: its model summary for hash ", hash,
                        " differs from the one recorded: ", ModelDifferences(w.model, recorded))});
    }
  }
  for (const auto& [id, why] : differing) {
    RETURN_IF_ERROR(DropWorker(id, why));
    evicted_.insert_or_assign(id, why);
  }
  return absl::OkStatus();
}

Status Scheduler::UnknownWorker(const std::string& worker_id) const {
  if (auto it = evicted_.find(worker_id); it != evicted_.end()) {
    return absl::FailedPreconditionError(it->second);
  }
  return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id, "; register again"));
}

Status Scheduler::Heartbeat(const std::string& worker_id, std::span<const PrefillKey> held,
                            std::span<const LeaseId> leases) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  WorkerState& w = it->second;
  const int64_t now = clock_();
  w.last_seen_ms = now;
  w.held = std::set<PrefillKey>(held.begin(), held.end());
  if (store_->write_failure()) return absl::OkStatus();  // StoreReopened; leases wait
  for (const LeaseId& listed : leases) {
    auto lease = w.leased.find(listed.key);
    if (lease == w.leased.end() || lease->second.attempt != listed.attempt) continue;
    const int64_t deadline =
        std::min(now + options_.lease_duration_ms, lease->second.task_deadline_ms);
    if (deadline <= now) continue;  // past the task deadline: ExpireLeases takes it back
    StatusOr<store::Task> t = store_->ExtendLease(listed.key, worker_id, deadline);
    if (LeaseGone(t.status())) {
      w.leased.erase(lease);
    } else if (!t.ok()) {
      return t.status();
    } else {
      lease->second.lease_deadline_ms = deadline;
    }
  }
  return absl::OkStatus();
}

Status Scheduler::WorkerGone(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  if (!workers_.contains(worker_id)) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  return DropWorker(worker_id, absl::StrCat("worker ", worker_id, " disconnected"));
}

Status Scheduler::DropWorker(const std::string& worker_id, const std::string& why) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return absl::OkStatus();
  const std::map<store::TaskKey, Lease> leased = std::move(it->second.leased);
  if (auto h = health_.find(worker_id); h != health_.end()) h->second.last_seen_ms = clock_();
  workers_.erase(it);
  for (const auto& [key, lease] : leased) {
    StatusOr<store::Task> t = store_->ReleaseLease(key, worker_id);
    if (t.ok()) {
      MarkPending(key);
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

StatusOr<Scheduler::WorkerState*> Scheduler::HeldLease(const std::string& worker_id,
                                                       const LeaseId& lease) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  auto held = it->second.leased.find(lease.key);
  if (held == it->second.leased.end() || held->second.attempt != lease.attempt) {
    return absl::FailedPreconditionError(absl::StrCat(TaskName(lease.key), " attempt ",
                                                      lease.attempt, " is not a lease worker ",
                                                      worker_id, " holds"));
  }
  return &it->second;
}

Status Scheduler::Release(const std::string& worker_id, WorkerState& worker,
                          const store::TaskKey& key) {
  worker.leased.erase(key);
  StatusOr<store::Task> t = store_->ReleaseLease(key, worker_id);
  if (t.ok()) {
    MarkPending(key);
    Changed();
  } else if (!LeaseGone(t.status())) {
    return t.status();
  }
  return absl::OkStatus();
}

Status Scheduler::CountFailure(const store::TaskKey& key, const std::string& worker_id,
                               const std::string& why, bool charge) {
  TaskFailures& count = failures_[key];
  count.failed_at[worker_id] = clock_();
  count.last_reason = why;
  if (charge) RETURN_IF_ERROR(ChargeWorker(worker_id, why));
  const size_t workers = count.failed_at.size();
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

bool Scheduler::Quarantined(const std::string& worker_id, int64_t now) const {
  auto it = health_.find(worker_id);
  return it != health_.end() && it->second.quarantined_until > now;
}

Scheduler::WorkerHealth& Scheduler::HealthOf(const std::string& worker_id) {
  WorkerHealth& h = health_[worker_id];
  if (auto w = workers_.find(worker_id); w != workers_.end()) {
    h.model_hash = w->second.model.hash;
    h.last_seen_ms = w->second.last_seen_ms;
  }
  return h;
}

Status Scheduler::ChargeWorker(const std::string& worker_id, const std::string& why) {
  const int64_t now = clock_();
  WorkerHealth& h = HealthOf(worker_id);
  std::erase_if(h.failures,
                [&](int64_t t) { return now - t >= options_.faults.quarantine_window_ms; });
  h.failures.push_back(now);
  if (h.failures.size() < options_.faults.quarantine_failures || Quarantined(worker_id, now)) {
    return absl::OkStatus();
  }
  return Quarantine(worker_id,
                    absl::StrCat(h.failures.size(), " failed attempts within ",
                                 options_.faults.quarantine_window_ms / 1000, " s; last: ", why));
}

Status Scheduler::Quarantine(const std::string& worker_id, const std::string& why) {
  const int64_t now = clock_();
  WorkerHealth& h = HealthOf(worker_id);
  const bool was = h.quarantined_until > now;
  h.quarantined_until = now + options_.faults.quarantine_ms;
  h.quarantine_reason = why;
  h.failures.clear();
  if (!was) {
    metrics_.quarantines.Add();
    metrics_.workers_quarantined.Add(1);
  }
  quarantines_.push_back(
      {.worker_id = worker_id, .reason = why, .until_ms = h.quarantined_until});
  any_quarantined_.store(true, std::memory_order_release);
  // Its held runs are suspect: their tasks need runs by others.
  for (auto v = verifying_.begin(); v != verifying_.end();) {
    std::erase_if(v->second.runs, [&](const VerifyRun& r) { return r.worker_id == worker_id; });
    v = v->second.runs.empty() ? verifying_.erase(v) : std::next(v);
  }
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return absl::OkStatus();
  WorkerState& w = it->second;
  std::vector<store::TaskKey> leased;
  for (const auto& [key, lease] : w.leased) leased.push_back(key);
  for (const store::TaskKey& key : leased) RETURN_IF_ERROR(Release(worker_id, w, key));
  Changed();
  return absl::OkStatus();
}

Status Scheduler::EndJob(store::JobId id, store::JobState state, const std::string& why,
                         const std::string& model_hash) {
  RETURN_IF_ERROR(store_->UpdateJobState(id, state, why).status());
  for (auto& [worker_id, w] : workers_) {
    std::erase_if(w.leased, [id](const auto& lease) { return lease.first.job == id; });
    w.last_sample.erase(id);
  }
  ForgetJob(id);
  NoteEnded({.id = id, .model_hash = model_hash, .state = state});
  Changed();
  return absl::OkStatus();
}

void Scheduler::ForgetJob(store::JobId id) {
  active_jobs_.reset();
  rates_.erase(id);
  pending_.erase(id);
  data_descriptions_.erase(id);
  unprofiled_.erase(id);
  job_refs_.erase(id);
  failures_.erase(failures_.lower_bound(store::TaskKey{id, 0, 0}),
                  failures_.lower_bound(store::TaskKey{id + 1, 0, 0}));
  // The store released the job's leases with its state change.
  completing_.erase(completing_.lower_bound(store::TaskKey{id, 0, 0}),
                    completing_.lower_bound(store::TaskKey{id + 1, 0, 0}));
  verifying_.erase(verifying_.lower_bound(store::TaskKey{id, 0, 0}),
                   verifying_.lower_bound(store::TaskKey{id + 1, 0, 0}));
  verification_.erase(id);
  stalled_since_.erase(id);
}

void Scheduler::Changed() {
  ++changes_;
  changed_.notify_all();
}

uint64_t Scheduler::WaitForChange(uint64_t seen, int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
  return changes_;
}

std::vector<EndedJob> Scheduler::TakeEndedJobs() {
  // A job ending while this runs is taken by the next call (the next message or tick).
  if (!any_ended_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(mu_);
  any_ended_.store(false, std::memory_order_relaxed);
  return std::exchange(ended_, {});
}

int64_t Scheduler::TaskDeadline(const store::JobSpec& spec, const method::ProfileModel& model,
                                int64_t now) const {
  const int64_t budget = options_.task_deadline_ms > 0 ? options_.task_deadline_ms
                                                       : DeriveTaskDeadlineMs(spec.params, model);
  return now + budget;
}

StatusOr<Scheduler::PendingSet*> Scheduler::Pending(store::JobId job) {
  auto it = pending_.find(job);
  if (it != pending_.end()) return &it->second;
  ASSIGN_OR_RETURN(std::vector<store::Task> tasks, store_->ListTasks(job));
  PendingSet pending;
  for (const store::Task& t : tasks) {
    if (t.state == store::TaskState::kPending) pending.insert(pending.end(), t.key);
  }
  return &pending_.emplace(job, std::move(pending)).first->second;
}

void Scheduler::MarkPending(const store::TaskKey& key) {
  auto it = pending_.find(key.job);
  if (it != pending_.end()) it->second.insert(key);
}

bool Scheduler::OtherEligible(const std::string& worker_id, const std::string& hash,
                              const store::TaskKey& key) const {
  const int64_t now = clock_();
  auto failed = failures_.find(key);
  auto held = verifying_.find(key);
  for (const auto& [id, w] : workers_) {
    if (id == worker_id || w.model.hash != hash || w.refused_jobs.contains(key.job) ||
        Quarantined(id, now)) {
      continue;
    }
    if (failed != failures_.end() && failed->second.failed_at.contains(id)) continue;
    if (held != verifying_.end() &&
        std::any_of(held->second.runs.begin(), held->second.runs.end(),
                    [&](const VerifyRun& r) { return r.worker_id == id; })) {
      continue;
    }
    return true;
  }
  return false;
}

bool Scheduler::MayLease(const std::string& worker_id, const WorkerState& worker,
                         const store::TaskKey& key, int64_t now) const {
  // A verification needs runs by distinct workers: never the same worker twice.
  if (auto held = verifying_.find(key); held != verifying_.end()) {
    for (const VerifyRun& r : held->second.runs) {
      if (r.worker_id == worker_id) return false;
    }
  }
  auto failed = failures_.find(key);
  if (failed == failures_.end()) return true;
  auto at = failed->second.failed_at.find(worker_id);
  if (at == failed->second.failed_at.end()) return true;
  // It failed here: back to this worker only after the grace, and only when nobody else can.
  return now - at->second >= options_.faults.exclusion_grace_ms &&
         !OtherEligible(worker_id, worker.model.hash, key);
}

std::optional<store::TaskKey> Scheduler::Choose(const std::string& worker_id,
                                                const WorkerState& worker, store::JobId job,
                                                const PendingSet& pending, int64_t now) const {
  // Most tasks were never failed nor held: only those need the eligibility check.
  const bool check = !failures_.empty() || !verifying_.empty();
  auto ok = [&](const store::TaskKey& key) {
    return !check || MayLease(worker_id, worker, key, now);
  };
  // The first eligible task at or after `it` within sample `s`, if any.
  auto first_of = [&](PendingSet::const_iterator it, uint32_t s) -> std::optional<store::TaskKey> {
    for (; it != pending.end() && it->sample == s; ++it) {
      if (ok(*it)) return *it;
    }
    return std::nullopt;
  };
  // The lowest eligible pending task of sample `s`, if any.
  auto of_sample = [&](uint32_t s) -> std::optional<store::TaskKey> {
    return first_of(pending.lower_bound(store::TaskKey{job, s, 0}), s);
  };
  // The lowest eligible pending task whose sample satisfies `pred`, visiting each sample once.
  auto first_pending = [&](auto&& pred) -> std::optional<store::TaskKey> {
    for (auto it = pending.begin(); it != pending.end();) {
      if (pred(it->sample)) {
        if (auto k = first_of(it, it->sample)) return k;
      }
      if (it->sample == UINT32_MAX) break;
      it = pending.lower_bound(store::TaskKey{job, it->sample + 1, 0});
    }
    return std::nullopt;
  };
  auto any = [](uint32_t) { return true; };
  if (pending.empty()) return std::nullopt;
  if (!options_.prefill_affinity) return first_pending(any);

  std::optional<uint32_t> last;
  if (auto it = worker.last_sample.find(job); it != worker.last_sample.end()) last = it->second;
  auto holds = [&](uint32_t s) { return worker.held.contains(PrefillKey{job, s}); };
  // 1. A sample whose prefill the worker holds, the one it was given last first.
  if (last && holds(*last)) {
    if (auto k = of_sample(*last)) return k;
  }
  for (auto held = worker.held.lower_bound(PrefillKey{job, 0});
       held != worker.held.end() && held->job == job; ++held) {
    if (auto k = of_sample(held->sample)) return k;
  }
  // 2. The sample it was given last (its prefill is probably cached even if not reported yet).
  if (last) {
    if (auto k = of_sample(*last)) return k;
  }
  // 3. A sample no other worker holds or works on, so two workers do not prefill the same one.
  std::set<uint32_t> claimed;
  for (const auto& [id, other] : workers_) {
    if (id == worker_id || other.model.hash != worker.model.hash) continue;
    for (auto held = other.held.lower_bound(PrefillKey{job, 0});
         held != other.held.end() && held->job == job; ++held) {
      claimed.insert(held->sample);
    }
    if (auto it = other.last_sample.find(job); it != other.last_sample.end()) {
      claimed.insert(it->second);
    }
  }
  if (auto k = first_pending([&](uint32_t s) { return !claimed.contains(s); })) return k;
  // 4. Anything left (tail of the job: help another worker's sample).
  return first_pending(any);
}

StatusOr<std::optional<Assignment>> Scheduler::NextTask(const std::string& worker_id) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  WorkerState& w = it->second;
  if (w.leased.size() >= w.capacity) return std::optional<Assignment>();
  const int64_t now = clock_();
  if (Quarantined(worker_id, now)) return std::optional<Assignment>();
  if (store_->write_failure()) return std::optional<Assignment>();  // a lease is a write
  if (!active_jobs_) {
    ASSIGN_OR_RETURN(active_jobs_, store_->ListJobs({.active_only = true}));
  }
  for (store::Job& job : *active_jobs_) {  // priority, then age
    if (job.spec.model_hash != w.model.hash || w.refused_jobs.contains(job.id)) continue;
    if (!models_.contains(job.spec.model_hash)) {
      // Before the summary is recorded, only workers agreeing with the submitter's ModelRef.
      if (!JobRef(job).Admits(w.model)) continue;
    }
    ASSIGN_OR_RETURN(PendingSet * pending, Pending(job.id));
    std::optional<store::TaskKey> key = Choose(worker_id, w, job.id, *pending, now);
    if (!key) continue;
    const int64_t task_deadline = TaskDeadline(job.spec, w.model, now);
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
    store::MethodParams params = job.spec.params;
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
    ASSIGN_OR_RETURN(WorkerState * worker, HeldLease(worker_id, lease));
    worker_version = worker->version;
    const auto held = worker->leased.find(key);
    // Exactly trials 0..trials-1 of this task, each once, each passing the aggregation's rule.
    const uint32_t trials = held->second.trials;
    std::string invalid;
    std::vector<bool> seen(trials, false);
    for (const store::TrialResult& r : results) {
      invalid = InvalidTaskResult(key, trials, r, r.trial < trials && seen[r.trial]);
      if (!invalid.empty()) break;
      seen[r.trial] = true;
    }
    if (invalid.empty() && results.size() != trials) {
      invalid = absl::StrCat("done with ", results.size(), " of ", trials, " trials");
    }
    if (!invalid.empty()) {
      const std::string why = absl::StrCat("worker ", worker_id, " sent invalid results for ",
                                           TaskName(key), ": ", invalid);
      RETURN_IF_ERROR(Release(worker_id, *worker, key));
      RETURN_IF_ERROR(CountFailure(key, worker_id, why, /*charge=*/true));
      return absl::InvalidArgumentError(why);
    }
    ++worker->tasks_completed;
    if (VerificationSelected(verify_key_, key, VerifyFraction(key.job))) {
      ASSIGN_OR_RETURN(std::optional<std::vector<store::TrialResult>> agreed,
                       Verify(worker_id, *worker, key, std::move(results)));
      if (!agreed) return Submitted::kAwaitingVerification;
      results = *std::move(agreed);
    }
    // The worker's slot is free now. Until the write lands the lease is `completing_`: should
    // the write fail, it expires from there like any other.
    const auto still = worker->leased.find(key);
    completing_.insert_or_assign(key, Completing{.worker_id = worker_id, .lease = still->second});
    worker->leased.erase(still);
    Changed();
  }
  committer_.Submit(
      key, std::move(results), {.id = worker_id, .version = std::move(worker_version)},
      [this, key, attempt = lease.attempt, worker_id,
       done = std::move(done)](StatusOr<store::ResultWriteOutcome> written) {
        done(written.ok() ? AfterCompletion(key, attempt, worker_id, *written) : written.status());
      });
  return Submitted::kCommitting;
}

double Scheduler::VerifyFraction(store::JobId job) {
  const store::Job* active = ActiveJob(job);
  return active == nullptr ? 0.0 : active->spec.verify_fraction;
}

const store::Job* Scheduler::ActiveJob(store::JobId id) {
  if (!active_jobs_) {
    StatusOr<std::vector<store::Job>> jobs = store_->ListJobs({.active_only = true});
    if (!jobs.ok()) return nullptr;
    active_jobs_ = *std::move(jobs);
  }
  for (const store::Job& job : *active_jobs_) {
    if (job.id == id) return &job;
  }
  return nullptr;
}

StatusOr<std::optional<std::vector<store::TrialResult>>> Scheduler::Verify(
    const std::string& worker_id, WorkerState& worker, const store::TaskKey& key,
    std::vector<store::TrialResult> results) {
  const int64_t now = clock_();
  std::sort(results.begin(), results.end(),
            [](const store::TrialResult& a, const store::TrialResult& b) { return a.trial < b.trial; });
  Verification& v = verifying_[key];
  if (v.runs.empty()) v.first_ms = now;
  v.runs.push_back({.worker_id = worker_id, .numerics = worker.numerics, .results = results});
  // Bitwise only for one CPU build: GPUs of one build but another model may round differently.
  auto agree = [](const VerifyRun& a, const VerifyRun& b) {
    const bool same_build = a.numerics == b.numerics && DeviceClass(a.numerics) == "cpu-fp32";
    return ResultsAgree(a.results, b.results, same_build,
                        NumericsTolerance(a.numerics, b.numerics));
  };
  const VerifyRun& run = v.runs.back();
  const auto peer = std::find_if(v.runs.begin(), v.runs.end() - 1,
                                 [&](const VerifyRun& r) { return agree(r, run); });
  JobVerification& record = verification_[key.job];
  if (peer != v.runs.end() - 1) {
    // Two distinct workers agree: the task completes with this run; the others are outvoted.
    const std::vector<std::string> agreeing = {peer->worker_id, worker_id};
    std::vector<std::string> outvoted;
    for (auto r = v.runs.begin(); r != v.runs.end() - 1; ++r) {
      if (!agree(*r, run)) outvoted.push_back(r->worker_id);
    }
    verifying_.erase(key);
    ++record.verified;
    metrics_.tasks_verified.Add();
    for (const std::string& bad : outvoted) {
      record.disagreements.push_back({.sample = key.sample,
                                      .layer = key.layer,
                                      .outvoted_worker = bad,
                                      .agreeing_workers = agreeing});
      record.outvoted.insert(bad);
      metrics_.verification_disagreements.Add();
      RETURN_IF_ERROR(Quarantine(
          bad, absl::StrCat("outvoted on ", TaskName(key), ": its results differ from those of "
                            "workers ", agreeing[0], " and ", agreeing[1], ", which agree")));
      RETURN_IF_ERROR(Recompute(key.job, bad));
    }
    return std::optional<std::vector<store::TrialResult>>(std::move(results));
  }
  if (v.runs.size() >= options_.max_attempts) {
    std::vector<std::string> ids;
    for (const VerifyRun& r : v.runs) ids.push_back(r.worker_id);
    ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
    RETURN_IF_ERROR(EndJob(key.job, store::JobState::kFailed,
                           absl::StrCat("no two of ", ids.size(), " workers agree on ",
                                        TaskName(key), " (", absl::StrJoin(ids, ", "),
                                        "): their builds or devices differ beyond the tolerance, "
                                        "or more than one is faulty"),
                           job.spec.model_hash));
    return std::optional<std::vector<store::TrialResult>>();
  }
  if (v.runs.size() == 1 && now - v.first_ms >= options_.faults.verify_wait_ms &&
      !OtherEligible(worker_id, worker.model.hash, key)) {
    // Nobody can verify it now and the wait is zero: it completes unverified.
    verifying_.erase(key);
    ++record.unverified;
    metrics_.tasks_unverified.Add();
    return std::optional<std::vector<store::TrialResult>>(std::move(results));
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
  for (const store::TaskKey& key : reopened) MarkPending(key);
  verification_[job].recomputed += reopened.size();
  metrics_.tasks_recomputed.Add(static_cast<double>(reopened.size()));
  active_jobs_.reset();  // the job records' counters changed
  Changed();
  return absl::OkStatus();
}

void Scheduler::CommitHeld(const store::TaskKey& key, const VerifyRun& run) {
  if (auto p = pending_.find(key.job); p != pending_.end()) p->second.erase(key);
  std::string version;
  if (auto w = workers_.find(run.worker_id); w != workers_.end()) version = w->second.version;
  committer_.Submit(key, run.results, {.id = run.worker_id, .version = std::move(version)},
                    [this, key, worker_id = run.worker_id](
                        StatusOr<store::ResultWriteOutcome> written) {
                      if (!written.ok()) {  // the task is pending again, and runs again
                        std::lock_guard lock(mu_);
                        MarkPending(key);
                        Changed();
                      }
                      const StatusOr<TaskResultsOutcome> outcome =
                          written.ok() ? AfterCompletion(key, /*attempt=*/0, worker_id, *written)
                                       : StatusOr<TaskResultsOutcome>(written.status());
                      std::lock_guard lock(listener_mu_);
                      if (held_listener_) held_listener_(worker_id, key, outcome);
                    });
}

void Scheduler::SetHeldCompletionListener(HeldCompletionListener listener) {
  std::lock_guard lock(listener_mu_);
  held_listener_ = std::move(listener);
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
  if (written.task_completed) {
    if (auto record = verification_.find(key.job);
        record != verification_.end() && record->second.outvoted.contains(worker_id)) {
      completing_.erase(key);
      RETURN_IF_ERROR(Reopen(key.job, {&key, 1}));
      return TaskResultsOutcome{.stored = written.stored};
    }
  }
  // The write cleared the lease (or found the task done already).
  int64_t leased_ms = -1;
  if (auto c = completing_.find(key);
      c != completing_.end() && c->second.lease.attempt == attempt) {
    leased_ms = c->second.lease.leased_ms;
    completing_.erase(c);
  }
  if (written.task_completed) {
    metrics_.tasks_completed.Add();
    if (leased_ms >= 0) {
      metrics_.result_latency.Observe(static_cast<double>(clock_() - leased_ms) / 1000.0);
    }
    // An expiry during the write may have put the task back in the index.
    if (auto p = pending_.find(key.job); p != pending_.end()) p->second.erase(key);
  }
  Changed();
  TaskResultsOutcome outcome{.stored = written.stored,
                             .duplicates = written.duplicates,
                             .conflicts = written.conflicts,
                             .task_completed = written.task_completed};
  if (!written.task_completed) return outcome;
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
  ObserveProgress(job);
  // Under mu_, so of the group's last completions exactly one sees the job running and complete.
  if (job.state == store::JobState::kRunning && job.tasks_done == job.tasks_total) {
    StatusOr<Finished> finished = FinishJob(job);
    if (finished.ok()) {
      outcome.profile_version = finished->profile_version;
      outcome.job_succeeded = !finished->extended;
      outcome.job_extended = finished->extended;
      outcome.samples_planned = finished->samples_planned;
    } else {
      unprofiled_.insert(job.id);  // retried by ExpireLeases
    }
  }
  return outcome;
}

Status Scheduler::FailAttempt(const std::string& worker_id, const LeaseId& lease,
                              const std::string& why) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(WorkerState * worker, HeldLease(worker_id, lease));
  RETURN_IF_ERROR(Release(worker_id, *worker, lease.key));
  return CountFailure(lease.key, worker_id, why, /*charge=*/true);
}

StatusOr<Scheduler::Finished> Scheduler::FinishJob(const store::Job& job) {
  auto model = models_.find(job.spec.model_hash);
  if (model == models_.end()) {
    RETURN_IF_ERROR(RecordModel(job.spec.model_hash));
    model = models_.find(job.spec.model_hash);
  }
  if (model == models_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id, " is complete but no worker holding model ",
                     job.spec.model_hash, " has registered; it is finished when one does"));
  }
  ASSIGN_OR_RETURN(std::vector<store::TrialResult> stored, store_->ListResults(job.id));
  std::vector<method::TrialKl> trials;
  trials.reserve(stored.size());
  for (const store::TrialResult& r : stored) trials.push_back({r.sample, r.layer, r.trial, r.kl});
  const store::MethodParams& p = job.spec.params;
  const method::ProfileParams params = method::MeasuredParams(
      p, job.samples_planned,
      job.data_description.empty() ? DescribeDataSource(job) : job.data_description,
      std::string(DataDomainOf(job)));
  StatusOr<method::SensitivityProfile> profile = method::AssembleProfile(
      model->second, params, trials,
      method::FormatIso8601Utc(
          std::chrono::system_clock::time_point(std::chrono::milliseconds(clock_()))));
  if (profile.ok() && job.spec.verify_fraction > 0) {
    method::ProfileVerification verified{.fraction = job.spec.verify_fraction};
    if (auto v = verification_.find(job.id); v != verification_.end()) {
      verified.tasks_verified = v->second.verified;
      verified.tasks_unverified = v->second.unverified;
      verified.tasks_recomputed = v->second.recomputed;
      verified.disagreements = v->second.disagreements;
    }
    profile->verification = std::move(verified);
  }
  if (profile.ok() && p.until_stable) {
    // worker::CalibrateUntilStable's criterion, with the same (default) options.
    StatusOr<method::ProfileStability> stability = method::ComputeStability(*profile);
    if (!stability.ok()) {
      profile = stability.status();
    } else {
      profile->stability = *std::move(stability);
      const uint32_t next = NextRoundSamples(p, job.samples_planned);
      if (!profile->stability->stable && next > job.samples_planned) {
        return BeginRound(job, model->second.n_layers, next);
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

StatusOr<Scheduler::Finished> Scheduler::BeginRound(const store::Job& job, int64_t model_n_layers,
                                                    uint32_t samples_planned) {
  const std::vector<store::PlannedTask> tasks =
      PlanRound(job.spec, model_n_layers, job.samples_planned, samples_planned);
  ASSIGN_OR_RETURN(store::Job extended, store_->ExtendJob(job.id, samples_planned, tasks));
  // The new tasks are leasable at once: into the index (when loaded; else it loads them), and the
  // job record NextTask reads carries the new samples_planned.
  if (auto it = pending_.find(job.id); it != pending_.end()) {
    for (const store::PlannedTask& t : tasks) {
      it->second.insert(store::TaskKey{job.id, t.sample, t.layer});
    }
  }
  active_jobs_.reset();
  // The store cleared the description, which names the sample count: the round reports anew.
  data_descriptions_.erase(job.id);
  unprofiled_.erase(job.id);
  Changed();
  return Finished{.extended = true, .samples_planned = extended.samples_planned};
}

Status Scheduler::FinishReadyJobs(ExpireOutcome& outcome) {
  RETURN_IF_ERROR(LoadModels());
  if (!checked_unprofiled_) {
    ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs({.active_only = true}));
    for (const store::Job& job : jobs) unprofiled_.insert(job.id);
    checked_unprofiled_ = true;
  }
  for (auto it = unprofiled_.begin(); it != unprofiled_.end();) {
    const store::JobId id = *it++;  // FinishJob erases `id` from unprofiled_
    ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
    if (job.state != store::JobState::kRunning || job.tasks_total == 0 ||
        job.tasks_done != job.tasks_total) {
      unprofiled_.erase(id);
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
  ASSIGN_OR_RETURN(WorkerState * w, HeldLease(worker_id, lease));
  const store::TaskKey& key = lease.key;
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(key.job));
  w->refused_jobs.insert(key.job);
  w->last_sample.erase(key.job);
  RETURN_IF_ERROR(Release(worker_id, *w, key));
  if (!fail_if_none_left || store::IsTerminal(job.state)) return false;
  for (const auto& [id, other] : workers_) {
    if (other.model.hash == job.spec.model_hash && !other.refused_jobs.contains(job.id)) {
      return false;
    }
  }
  RETURN_IF_ERROR(EndJob(job.id, store::JobState::kFailed, why, job.spec.model_hash));
  return true;
}

StatusOr<bool> Scheduler::DescribeJobData(store::JobId id, const std::string& description) {
  std::lock_guard lock(mu_);
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

Status Scheduler::ReleaseTask(const std::string& worker_id, const LeaseId& lease) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(WorkerState * w, HeldLease(worker_id, lease));
  return Release(worker_id, *w, lease.key);
}

Status Scheduler::FailJobOfLease(const std::string& worker_id, const LeaseId& lease,
                                 const std::string& why) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(HeldLease(worker_id, lease).status());
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
  active_jobs_.reset();
  pending_.clear();
  StatusOr<std::vector<store::Job>> jobs = store_->ListJobs({.active_only = true});
  if (jobs.ok()) {
    for (const store::Job& job : *jobs) {
      StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
      if (!tasks.ok()) continue;
      for (const store::Task& t : *tasks) {
        if (t.state != store::TaskState::kLeased) continue;
        auto owner = workers_.find(t.lease_owner);
        if (owner != workers_.end() && owner->second.leased.contains(t.key)) continue;
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
  for (const auto& [id, w] : workers_) {
    if (now - w.last_seen_ms > options_.heartbeat_timeout_ms) silent.push_back(id);
  }
  for (const std::string& id : silent) {
    for (const auto& [key, lease] : workers_[id].leased) outcome.released.push_back(key);
    RETURN_IF_ERROR(DropWorker(id, absl::StrCat("worker ", id, " went silent")));
    metrics_.workers_lost.Add();
    outcome.dropped_workers.push_back(id);
  }
  // Every lease in the store is in memory (a worker's, or completing_): expiry reads no tasks.
  struct Expired {
    std::string worker_id;
    store::TaskKey key;
    Lease lease;
    bool completing = false;  // its results were submitted; their write failed or is slow
  };
  std::vector<Expired> expired;
  for (const auto& [id, w] : workers_) {
    for (const auto& [key, lease] : w.leased) {
      if (lease.lease_deadline_ms <= now) expired.push_back({id, key, lease});
    }
  }
  for (const auto& [key, c] : completing_) {
    if (c.lease.lease_deadline_ms <= now) expired.push_back({c.worker_id, key, c.lease, true});
  }
  for (const Expired& e : expired) {
    if (e.completing) {
      completing_.erase(e.key);
    } else {
      workers_.at(e.worker_id).leased.erase(e.key);
    }
    StatusOr<store::Task> t = store_->ReleaseLease(e.key, e.worker_id);
    if (LeaseGone(t.status())) continue;  // done or released meanwhile
    RETURN_IF_ERROR(t.status());
    Changed();
    MarkPending(e.key);
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
      outcome.revocations.push_back({.worker_id = e.worker_id,
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

StatusOr<uint64_t> Scheduler::PendingInlineBytes() {
  if (!active_jobs_) {
    ASSIGN_OR_RETURN(active_jobs_, store_->ListJobs({.active_only = true}));
  }
  uint64_t bytes = 0;
  for (const store::Job& job : *active_jobs_) {
    if (job.state == store::JobState::kPending) bytes += job.data_inline_bytes;
  }
  return bytes;
}

Status Scheduler::ExpirePendingJobs(int64_t now) {
  if (options_.pending_job_ttl_ms <= 0) return absl::OkStatus();
  if (!active_jobs_) {
    ASSIGN_OR_RETURN(active_jobs_, store_->ListJobs({.active_only = true}));
  }
  std::vector<store::Job> expired;
  for (const store::Job& job : *active_jobs_) {
    if (job.state == store::JobState::kPending &&
        now - job.created_at_ms > options_.pending_job_ttl_ms) {
      expired.push_back(job);
    }
  }
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
  for (auto it = health_.begin(); it != health_.end();) {
    WorkerHealth& h = it->second;
    if (h.quarantined_until != 0 && h.quarantined_until <= now) {
      h.quarantined_until = 0;
      h.quarantine_reason.clear();
      metrics_.workers_quarantined.Add(-1);
      Changed();
    }
    std::erase_if(h.failures,
                  [&](int64_t t) { return now - t >= options_.faults.quarantine_window_ms; });
    const bool idle = h.quarantined_until == 0 && h.failures.empty();
    it = idle ? health_.erase(it) : std::next(it);
  }
  // Held first runs that nobody could verify within the wait complete unverified.
  std::vector<store::TaskKey> lonely;
  for (const auto& [key, v] : verifying_) {
    if (v.runs.size() != 1 || now - v.first_ms < options_.faults.verify_wait_ms) continue;
    const store::Job* job = ActiveJob(key.job);
    auto pending = pending_.find(key.job);
    if (job == nullptr || pending == pending_.end() || !pending->second.contains(key)) continue;
    if (!OtherEligible(v.runs.front().worker_id, job->spec.model_hash, key)) lonely.push_back(key);
  }
  for (const store::TaskKey& key : lonely) {
    VerifyRun run = std::move(verifying_.at(key).runs.front());
    verifying_.erase(key);
    ++verification_[key.job].unverified;
    metrics_.tasks_unverified.Add();
    CommitHeld(key, run);
  }
  if (options_.faults.job_wait_ms <= 0) return absl::OkStatus();
  if (!active_jobs_) {
    ASSIGN_OR_RETURN(active_jobs_, store_->ListJobs({.active_only = true}));
  }
  std::vector<std::pair<store::Job, std::string>> stalled;
  for (const store::Job& job : *active_jobs_) {
    const Waiting waiting = WaitingReason(job);
    if (!waiting.fault) {
      stalled_since_.erase(job.id);
      continue;
    }
    const int64_t since = stalled_since_.try_emplace(job.id, now).first->second;
    if (now - since > options_.faults.job_wait_ms) stalled.push_back({job, waiting.reason});
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
  auto pending = pending_.find(job.id);
  if (pending == pending_.end() || pending->second.empty()) return {};
  const int64_t now = clock_();
  const std::string& hash = job.spec.model_hash;
  std::vector<const std::pair<const std::string, WorkerState>*> healthy;
  for (const auto& entry : workers_) {
    const auto& [id, w] = entry;
    if (w.model.hash == hash && !w.refused_jobs.contains(job.id) && !Quarantined(id, now)) {
      healthy.push_back(&entry);
    }
  }
  if (healthy.empty()) {
    std::vector<std::string> quarantined;
    for (const auto& [id, h] : health_) {
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
  const Verification* disputed = nullptr;
  store::TaskKey disputed_key;
  for (const store::TaskKey& key : pending->second) {
    auto v = verifying_.find(key);
    if (v == verifying_.end()) return {};
    for (const auto* entry : healthy) {
      if (MayLease(entry->first, entry->second, key, now)) return {};
    }
    ++held;
    if (v->second.runs.size() >= 2 && disputed == nullptr) {
      disputed = &v->second;
      disputed_key = key;
    }
  }
  if (disputed != nullptr) {
    std::vector<std::string> ids;
    for (const VerifyRun& r : disputed->runs) ids.push_back(r.worker_id);
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
  for (const auto& [worker_id, w] : workers_) {
    for (const auto& [key, lease] : w.leased) {
      if (key.job == id) {
        outcome.revocations.push_back(
            {.worker_id = worker_id, .lease = {key, lease.attempt}, .reason = why});
      }
    }
  }
  RETURN_IF_ERROR(EndJob(id, store::JobState::kCancelled, why, outcome.job.spec.model_hash));
  ASSIGN_OR_RETURN(outcome.job, store_->GetJobMeta(id));
  outcome.job.spec.data_inline.clear();
  return outcome;
}

void Scheduler::ObserveProgress(const store::Job& job) {
  const int64_t now = clock_();
  auto [it, inserted] = rates_.try_emplace(job.id);
  if (inserted) {
    it->second.first_ms = now;
    it->second.first_done = job.tasks_done;
  }
  it->second.last_ms = now;
  it->second.last_done = job.tasks_done;
}

StatusOr<JobProgress> Scheduler::Progress(store::JobId id) {
  std::lock_guard lock(mu_);
  JobProgress progress;
  ASSIGN_OR_RETURN(progress.job, store_->GetJobMeta(id));
  progress.job.spec.data_inline.clear();
  if (!store::IsTerminal(progress.job.state)) {
    // Leased = neither done nor pending: the index answers without a scan.
    ASSIGN_OR_RETURN(PendingSet * pending, Pending(id));
    progress.tasks_leased = progress.job.tasks_total - progress.job.tasks_done - pending->size();
  }
  if (!store::IsTerminal(progress.job.state)) {
    progress.waiting_reason = WaitingReason(progress.job).reason;
  }
  if (auto v = verification_.find(id); v != verification_.end()) {
    progress.tasks_verified = v->second.verified;
    progress.disagreements = static_cast<uint32_t>(v->second.disagreements.size());
  }
  auto it = rates_.find(id);
  if (it != rates_.end() && it->second.last_ms > it->second.first_ms &&
      it->second.last_done > it->second.first_done) {
    const RateObservation& r = it->second;
    progress.tasks_per_second = static_cast<double>(r.last_done - r.first_done) * 1000.0 /
                                static_cast<double>(r.last_ms - r.first_ms);
    const uint64_t remaining = progress.job.tasks_total - progress.job.tasks_done;
    progress.eta_ms =
        static_cast<int64_t>(static_cast<double>(remaining) * 1000.0 / progress.tasks_per_second);
  }
  return progress;
}

StatusOr<store::JobSpec> Scheduler::JobData(const std::string& worker_id, store::JobId id) const {
  ASSIGN_OR_RETURN(store::Job job, store_->GetJobMeta(id));
  if (store::IsTerminal(job.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(store::JobStateName(job.state))));
  }
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  auto lease = it->second.leased.lower_bound(store::TaskKey{id, 0, 0});
  if (lease == it->second.leased.end() || lease->first.job != id) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker ", worker_id, " holds no task of job ", id));
  }
  ASSIGN_OR_RETURN(job, store_->GetJob(id));  // with the inline data
  return std::move(job.spec);
}

StatusOr<JobPage> Scheduler::ListJobs(const JobFilter& filter) const {
  // The page arguments are checked before the store is read.
  RETURN_IF_ERROR(Page(filter.page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs());
  std::erase_if(jobs, [&](const store::Job& job) {
    if (!filter.states.empty() &&
        std::find(filter.states.begin(), filter.states.end(), job.state) == filter.states.end()) {
      return true;
    }
    return !filter.model_hash.empty() && job.spec.model_hash != filter.model_hash;
  });
  // Newest first: by create time, then id, both descending.
  std::sort(jobs.begin(), jobs.end(), [](const store::Job& a, const store::Job& b) {
    if (a.created_at_ms != b.created_at_ms) return a.created_at_ms > b.created_at_ms;
    return a.id > b.id;
  });
  ASSIGN_OR_RETURN(PageRange range, Page(filter.page, jobs.size()));
  JobPage page;
  page.jobs.assign(std::make_move_iterator(jobs.begin() + static_cast<ptrdiff_t>(range.begin)),
                   std::make_move_iterator(jobs.begin() + static_cast<ptrdiff_t>(range.end)));
  page.next_page_token = NextPageToken(range, jobs.size());
  return page;
}

StatusOr<TaskPage> Scheduler::ListTasks(store::JobId id, const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::Task> tasks, store_->ListTasks(id));
  ASSIGN_OR_RETURN(PageRange range, Page(page, tasks.size()));
  TaskPage out;
  out.tasks.assign(std::make_move_iterator(tasks.begin() + static_cast<ptrdiff_t>(range.begin)),
                   std::make_move_iterator(tasks.begin() + static_cast<ptrdiff_t>(range.end)));
  out.next_page_token = NextPageToken(range, tasks.size());
  return out;
}

StatusOr<StoredProfile> Scheduler::GetProfile(const std::string& model_hash,
                                              uint32_t version) const {
  ASSIGN_OR_RETURN(store::ProfileVersion record, store_->GetProfile(model_hash, version));
  return ParseStoredProfile(std::move(record));
}

StatusOr<ProfilePage> Scheduler::ListProfiles(const std::string& model_hash,
                                              const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::ProfileVersion> records, store_->ListProfiles(model_hash));
  // By hash, then version descending.
  std::sort(records.begin(), records.end(),
            [](const store::ProfileVersion& a, const store::ProfileVersion& b) {
              if (a.model_hash != b.model_hash) return a.model_hash < b.model_hash;
              return a.version > b.version;
            });
  ASSIGN_OR_RETURN(PageRange range, Page(page, records.size()));
  ProfilePage out;
  for (size_t i = range.begin; i < range.end; ++i) {
    ASSIGN_OR_RETURN(StoredProfile profile, ParseStoredProfile(std::move(records[i])));
    out.profiles.push_back(std::move(profile));
  }
  out.next_page_token = NextPageToken(range, records.size());
  return out;
}

StatusOr<ProfileBudgetMap> Scheduler::GetBudgetMap(const std::string& model_hash, uint32_t version,
                                                   const method::BudgetOptions& options) const {
  ProfileBudgetMap out;
  ASSIGN_OR_RETURN(out.profile, GetProfile(model_hash, version));
  // A stored profile that cannot give a map (a layer never measured) is the stored version's
  // fault, not the request's: FailedPrecondition. Bad options stay InvalidArgument.
  StatusOr<std::vector<double>> sensitivity = method::LayerSensitivities(out.profile.profile);
  if (!sensitivity.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", out.profile.model_hash,
                                                      " version ", out.profile.version, ": ",
                                                      sensitivity.status().message()));
  }
  ASSIGN_OR_RETURN(method::BudgetMap map, method::ComputeBudgetMap(*sensitivity, options));
  map.model_hash = out.profile.profile.model.hash;
  out.map = std::move(map);
  return out;
}

std::vector<std::string> Scheduler::Workers() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, w] : workers_) ids.push_back(id);
  return ids;
}

StatusOr<WorkerPage> Scheduler::ListWorkers(const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  std::map<std::string, WorkerInfo> all;
  for (const auto& [id, w] : workers_) {
    all[id] = WorkerInfo{.worker_id = id,
                         .connected = true,
                         .model_hash = w.model.hash,
                         .version = w.version,
                         .device = w.device,
                         .numerics = w.numerics,
                         .capacity = w.capacity,
                         .leases = static_cast<uint32_t>(w.leased.size()),
                         .last_seen_ms = w.last_seen_ms,
                         .tasks_completed = w.tasks_completed};
  }
  for (const auto& [id, h] : health_) {
    auto it = all.find(id);
    if (it == all.end()) {
      if (h.quarantined_until <= now) continue;  // only its failures: shown while registered
      it = all.emplace(id, WorkerInfo{.worker_id = id, .last_seen_ms = h.last_seen_ms}).first;
    }
    WorkerInfo& info = it->second;
    info.recent_failures = static_cast<uint32_t>(std::count_if(
        h.failures.begin(), h.failures.end(),
        [&](int64_t t) { return now - t < options_.faults.quarantine_window_ms; }));
    if (h.quarantined_until > now) {
      info.quarantined = true;
      info.quarantine_reason = h.quarantine_reason;
      info.quarantined_until_ms = h.quarantined_until;
    }
  }
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
  auto it = health_.find(worker_id);
  if (it == health_.end() || !Quarantined(worker_id, clock_())) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not quarantined"));
  }
  std::string reason = std::move(it->second.quarantine_reason);
  health_.erase(it);
  metrics_.workers_quarantined.Add(-1);
  Changed();
  return reason;
}

std::vector<QuarantineNotice> Scheduler::TakeQuarantines() {
  if (!any_quarantined_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(mu_);
  any_quarantined_.store(false, std::memory_order_relaxed);
  return std::exchange(quarantines_, {});
}

}  // namespace ripplekv::scheduler
