#include "worker/service/task_runner.h"

#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "method/calibration_params.h"
#include "spdlog/spdlog.h"

namespace ripplekv::worker {
namespace {

// The method's parameters of one task: its layer is the one layer measured, and the samples are
// those planned so far (a task is one round's member; the rounds themselves are the scheduler's).
method::CalibrationParams CalibrationParamsOf(const TaskSpec& spec) {
  method::CalibrationParams params = spec.params;
  params.layers = {spec.layer};
  return params;
}

// Stands for the file in sample sources ("inline jsonl:3") and messages of inline JSONL data.
constexpr std::string_view kInlineJsonlSource = "inline jsonl";

// The job's JSONL lines, parsed in memory as a JSONL file holding them (one per line) would be.
StatusOr<CalibrationSet> JsonlFromLines(const std::vector<std::string>& lines, bool strict,
                                        const Tokenizer& tokenizer, DataOptions options) {
  const std::string body = absl::StrJoin(lines, "\n") + "\n";
  options.strict = strict;
  return CalibrationDataFromJsonl(body, kInlineJsonlSource, tokenizer, options);
}

// A job's file, read only through `data_dirs`; see BuildCalibrationSet for the contract.
StatusOr<CalibrationSet> PathData(const JobData& data, const Tokenizer& tokenizer,
                                  DataOptions options, const DataDirs& data_dirs) {
  options.format = data.format;
  options.strict = data.strict;
  const bool jsonl = data.format == DataFormat::kJsonl ||
                     (data.format == DataFormat::kAuto && IsJsonlPath(data.path));
  StatusOr<std::string> bytes =
      data_dirs.ReadFile(data.path, jsonl ? kMaxCalibrationJsonlBytes : kMaxCalibrationTextBytes);
  if (!bytes.ok()) {
    // The path and the reason come from a client's job: escaped, one log line.
    spdlog::warn("calibration data path refused: {}", absl::CEscape(bytes.status().ToString()));
    return absl::FailedPreconditionError(std::string(kDataPathRefused));
  }
  if (jsonl) return CalibrationDataFromJsonl(*bytes, data.path, tokenizer, options);
  return CalibrationDataFromText(*bytes, data.path, tokenizer, options);
}

}  // namespace

std::string SampleKey(const std::string& job_id, int sample) {
  return absl::StrCat(job_id, "/", sample);
}

StatusOr<CalibrationSet> BuildCalibrationSet(const JobData& data, const Tokenizer& tokenizer,
                                             DataOptions options, const DataDirs& data_dirs) {
  RETURN_IF_ERROR(ValidateDataOptions(options));
  switch (data.source) {
    case JobData::Source::kBuiltin: {
      const std::string_view name =
          data.builtin.empty() ? kDefaultCalibrationBuiltin : std::string_view(data.builtin);
      if (Status known = CheckBuiltinCalibrationName(name); !known.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("data.builtin: ", known.message()));
      }
      return BuiltinCalibrationData(name, tokenizer, options);
    }
    case JobData::Source::kText:
      return CalibrationDataFromText(data.text, "inline text", tokenizer, options);
    case JobData::Source::kJsonl:
      return JsonlFromLines(data.jsonl_lines, data.strict, tokenizer, options);
    case JobData::Source::kPath:
      return PathData(data, tokenizer, options, data_dirs);
  }
  return absl::InvalidArgumentError("data: no source");
}

TaskRunner::TaskRunner(const Transformer& model, const Tokenizer* tokenizer, std::string model_hash,
                       const TaskRunnerOptions& options)
    : model_(&model),
      tokenizer_(tokenizer),
      model_hash_(std::move(model_hash)),
      no_compute_(options.no_compute),
      memory_limit_bytes_(options.memory_limit_bytes),
      weights_(options.weights),
      data_dirs_(options.data_dirs),
      cache_(options.cache) {}

MemoryEstimate TaskRunner::Estimate(const TaskSpec& spec) const {
  return EstimateCalibrationMemory(model_->config(), WeightBytes(model_->model()),
                                   {.threads = model_->op_context().num_threads,
                                    .context_len = static_cast<int>(spec.params.context_len),
                                    .probe_len = static_cast<int>(spec.params.probe_len),
                                    .trials = static_cast<int>(spec.params.trials),
                                    .weights = weights_,
                                    .mode = spec.params.mode});
}

std::optional<TaskRefusal> TaskRunner::Check(const TaskSpec& spec) const {
  if (spec.model_hash != model_hash_) {
    return TaskRefusal{Refusal::kModelHashMismatch,
                       absl::StrCat("model hash ", model_hash_, " loaded, job ", spec.job_id,
                                    " wants ", spec.model_hash)};
  }
  // The method's rules (method/calibration_params.h), the task's layer among them.
  if (Status s =
          method::ValidateCalibrationParams(CalibrationParamsOf(spec), model_->config().n_layers);
      !s.ok()) {
    return TaskRefusal{Refusal::kInvalidTask, std::string(s.message())};
  }
  if (spec.sample < 0 || spec.sample >= spec.params.samples) {
    return TaskRefusal{
        Refusal::kInvalidTask,
        absl::StrCat("sample ", spec.sample, " out of range [0, ", spec.params.samples, ")")};
  }
  if (memory_limit_bytes_ > 0) {
    const MemoryEstimate e = Estimate(spec);
    if (e.total_bytes() > memory_limit_bytes_) {
      return TaskRefusal{
          Refusal::kInsufficientMemory,
          absl::StrCat("job ", spec.job_id, " needs an estimated ", DescribeEstimate(e),
                       " for context ", spec.params.context_len, ", probe ", spec.params.probe_len,
                       ", ", spec.params.trials, " trials but this worker's limit is ",
                       FormatBytes(memory_limit_bytes_))};
    }
  }
  return std::nullopt;
}

bool TaskRunner::HasJob(const std::string& job_id, int min_samples) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && static_cast<int64_t>(it->second->samples.size()) >= min_samples;
}

Status TaskRunner::LoadJob(const std::string& job_id, const JobData& data,
                           const DataOptions& options) {
  if (tokenizer_ == nullptr) {
    return absl::FailedPreconditionError("worker has no tokenizer to read calibration data");
  }
  ASSIGN_OR_RETURN(CalibrationSet set, BuildCalibrationSet(data, *tokenizer_, options, data_dirs_));
  if (mirror_) {
    RETURN_IF_ERROR(mirror_({.kind = RunnerCommand::Kind::kSamples,
                             .job_id = job_id,
                             .samples = &set.samples,
                             .description = set.description}));
  }
  SetJobSamples(job_id, std::move(set.samples), std::move(set.description));
  return absl::OkStatus();
}

void TaskRunner::SetJobSamples(const std::string& job_id, std::vector<CalibrationSample> samples,
                               std::string description) {
  auto shared = std::make_shared<const LoadedJob>(
      LoadedJob{.samples = std::move(samples), .description = std::move(description)});
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job_id] = std::move(shared);
}

StatusOr<TaskOutcome> TaskRunner::Run(const TaskSpec& spec) {
  std::shared_ptr<const LoadedJob> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(spec.job_id);
    if (it == jobs_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", spec.job_id, ": calibration data not loaded"));
    }
    job = it->second;
  }
  if (spec.sample < 0 || spec.sample >= static_cast<int>(job->samples.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ", spec.sample, " out of range [0, ", job->samples.size(), ")"));
  }
  if (mirror_) {
    RETURN_IF_ERROR(
        mirror_({.kind = RunnerCommand::Kind::kRun, .job_id = spec.job_id, .spec = &spec}));
  }
  ASSIGN_OR_RETURN(TaskOutcome outcome, RunOnSample(spec, job->samples[spec.sample]));
  outcome.data_description = job->description;
  return outcome;
}

StatusOr<TaskOutcome> TaskRunner::RunOnSample(const TaskSpec& spec,
                                              const CalibrationSample& sample) {
  TaskOutcome outcome;
  outcome.prefill_reused = true;
  if (no_compute_) {
    for (int t = 0; t < spec.params.trials; ++t) {
      outcome.kl.push_back(NoComputeKl(spec.params.seed, spec.sample, spec.layer, t));
    }
    return outcome;
  }
  const Transformer& model = *model_;
  const TrialOptions trials = TrialOptionsOf(spec.params);
  ASSIGN_OR_RETURN(std::shared_ptr<const SampleCalibrator> prepared,
                   cache_.GetOrPrepare(SampleKey(spec.job_id, spec.sample), [&]() {
                     outcome.prefill_reused = false;
                     return SampleCalibrator::Prepare(model, spec.sample, sample.context,
                                                      sample.probe, spec.params.mode,
                                                      ObserverOptionsFor(trials));
                   }));
  ASSIGN_OR_RETURN(outcome.kl, prepared->RunLayer(spec.layer, trials));
  return outcome;
}

void TaskRunner::DropJob(const std::string& job_id) {
  if (mirror_) {
    if (Status s = mirror_({.kind = RunnerCommand::Kind::kDrop, .job_id = job_id}); !s.ok()) {
      spdlog::warn("job {}: the drop was not sent to the group: {}", job_id, s.ToString());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(job_id);
  }
  cache_.EraseWithPrefix(job_id + "/");
}

double NoComputeKl(uint64_t seed, int sample, int layer, int trial) {
  // splitmix64 of the key, mapped to [0, 1): a spread of values per layer, identical on retries.
  uint64_t z = seed ^ (static_cast<uint64_t>(sample) << 40) ^ (static_cast<uint64_t>(layer) << 20) ^
               static_cast<uint64_t>(trial);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
  return 1e-3 * (1.0 + layer) * (1.0 + 0.1 * u);
}

std::vector<CachedSampleKey> TaskRunner::CachedSamples() const {
  std::vector<CachedSampleKey> out;
  for (const std::string& key : cache_.Keys()) {
    const size_t slash = key.rfind('/');
    if (slash == std::string::npos) continue;
    CachedSampleKey k;
    k.job_id = key.substr(0, slash);
    k.sample = std::atoi(key.c_str() + slash + 1);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace ripplekv::worker
