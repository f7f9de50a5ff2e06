#pragma once
// The worker's task-execution core, with no network: a task (job, sample, layer, all trials) is
// checked against the loaded model, its job's calibration samples are derived from the job's data
// exactly as `ripplekv calibrate` derives them, and its trials run through the bounded cache of
// prepared samples (PreparedSampleCache::GetOrPrepare + SampleCalibrator::RunLayer). The gRPC
// client (worker_client.h) is a thin adapter over this class.
//
// Thread-safety: every public method may be called concurrently.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/calibration_params.h"
#include "worker/calibration/memory_estimate.h"
#include "worker/calibration/prepared_cache.h"
#include "worker/calibration/sample_calibrator.h"
#include "worker/data/calibration_data.h"
#include "worker/data/data_dirs.h"
#include "worker/engine/transformer.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

// A job's calibration data as the scheduler hands it out (GetJobData); exactly one source.
struct JobData {
  enum class Source { kBuiltin, kText, kJsonl, kPath };
  Source source = Source::kBuiltin;
  // kBuiltin: one of BuiltinCalibrationNames(); empty: kDefaultCalibrationBuiltin.
  std::string builtin = std::string(kDefaultCalibrationBuiltin);
  std::string text;                       // kText: plain text
  std::vector<std::string> jsonl_lines;   // kJsonl: one JSON object per line
  std::string path;                       // kPath: absolute; read only under the data dirs
  DataFormat format = DataFormat::kAuto;  // kPath only
  bool strict = false;
};

// One task with its job's resolved parameters.
struct TaskSpec {
  std::string task_id;
  std::string job_id;
  std::string model_hash;  // the job's model, 64 lowercase hex
  int sample = 0;          // index into the job's calibration set
  int layer = 0;           // layer to perturb
  // The job's method parameters (method/calibration_params.h) as the scheduler assigns them:
  // samples is the samples planned so far; the data's strict flag and format come from JobData.
  // The engine reads them through TrialOptionsOf and DataOptionsOf.
  method::CalibrationParams params;
};

// Why a task is not run (mirrors ripplekv.v1.RefusalReason).
enum class Refusal {
  kModelHashMismatch,
  kAtCapacity,
  kDraining,
  kDataUnavailable,
  kInvalidTask,
  kTransient,
  kInsufficientMemory,  // the job's estimated memory exceeds the worker's limit
};

struct TaskRefusal {
  Refusal reason = Refusal::kTransient;
  std::string message;  // one line
};

struct TaskOutcome {
  std::vector<double> kl;        // per trial 0..trials-1, nats
  bool prefill_reused = false;   // the prepared sample came from the cache
  std::string data_description;  // the job's CalibrationSet::description (empty when unknown)
};

// A command of a runner that touches the model, as a tensor-parallel group's rank 0 mirrors it to
// the other ranks (worker/service/task_group.h). Pointers are valid during the mirror call only.
struct RunnerCommand {
  enum class Kind { kSamples, kRun, kDrop };
  Kind kind = Kind::kRun;
  std::string job_id;
  const std::vector<CalibrationSample>* samples = nullptr;  // kSamples
  std::string description;                                  // kSamples
  const TaskSpec* spec = nullptr;                           // kRun
};

struct CachedSampleKey {
  std::string job_id;
  int sample = 0;
};

struct TaskRunnerOptions {
  PreparedCacheOptions cache;  // bounds of the prepared-sample cache
  // Benchmark mode: tasks are checked and their job data loaded as usual, but Run returns
  // synthetic KL values (NoComputeKl) without touching the model, so a scheduler's own overhead
  // can be measured with workers that cost nothing. Never for real jobs.
  bool no_compute = false;
  // The process's memory limit, bytes (docs/MEMORY.md); 0: no check. A task whose job's
  // EstimateCalibrationMemory total (this model, the runner's threads, the job's C, W, T and mode)
  // exceeds it is refused by Check() with Refusal::kInsufficientMemory.
  int64_t memory_limit_bytes = 0;
  WeightStorage weights = WeightStorage::kStored;  // how the model's weights are held
  // Where jobs' path data may be read (--data-dir); empty (the default): path data is refused.
  DataDirs data_dirs;
};

class TaskRunner {
 public:
  // `model` (and `tokenizer`, when not null) must outlive the runner. `model_hash` is the loaded
  // model's worker::ModelHash. Without a tokenizer only tasks whose samples were given by
  // SetJobSamples can run.
  TaskRunner(const Transformer& model, const Tokenizer* tokenizer, std::string model_hash,
             const TaskRunnerOptions& options);

  // Refusal for a task this worker must not run (model hash mismatch, layer out of range, bad
  // parameters, a job whose estimated memory exceeds the limit), or nullopt. Cheap; needs no data.
  std::optional<TaskRefusal> Check(const TaskSpec& spec) const;

  // True when at least `min_samples` samples of `job_id` are known (no GetJobData needed). A job
  // of rounds (until_stable) asks for more samples with each round; its first ones stay the same
  // (the data's nested order), so a worker holding fewer loads the job again.
  bool HasJob(const std::string& job_id, int min_samples = 0) const;
  // Derives the job's samples from `data` with the task's DataOptions (same functions and
  // options as `ripplekv calibrate`, so sample i is the same everywhere) and keeps them for the
  // job, replacing samples loaded before (prepared samples stay cached: sample i of a larger set
  // is sample i of the smaller one). Path data is read through the options' data_dirs (see
  // BuildCalibrationSet). Errors: those of BuildCalibrationSet; FailedPrecondition without a
  // tokenizer.
  [[nodiscard]] Status LoadJob(const std::string& job_id, const JobData& data,
                               const DataOptions& options);
  // Installs already derived samples for a job (tests, or a caller that loaded them itself),
  // with the set's description when known.
  void SetJobSamples(const std::string& job_id, std::vector<CalibrationSample> samples,
                     std::string description = {});

  // Runs every trial of the task. Errors: FailedPrecondition (job not loaded), InvalidArgument
  // (sample out of range, parameters the engine rejects), others from the engine.
  [[nodiscard]] StatusOr<TaskOutcome> Run(const TaskSpec& spec);
  // Runs every trial of `spec.layer` on `sample` directly (no job bookkeeping).
  [[nodiscard]] StatusOr<TaskOutcome> RunOnSample(const TaskSpec& spec,
                                                  const CalibrationSample& sample);

  // Forgets a job: its samples and its cached prefills.
  void DropJob(const std::string& job_id);

  // Called with every LoadJob's samples, Run and DropJob before it happens here; an error fails
  // the call (a tensor-parallel group's rank 0 sends them to its other ranks). Set before use.
  using Mirror = std::function<Status(const RunnerCommand&)>;
  void SetMirror(Mirror mirror) { mirror_ = std::move(mirror); }

  // Samples whose prefill the cache holds now (what heartbeats advertise).
  std::vector<CachedSampleKey> CachedSamples() const;
  PreparedCacheStats cache_stats() const { return cache_.stats(); }
  // The memory estimate of one task of `spec`'s job on this runner's model and threads.
  MemoryEstimate Estimate(const TaskSpec& spec) const;
  const std::string& model_hash() const { return model_hash_; }

 private:
  const Transformer* model_;
  const Tokenizer* tokenizer_;
  const std::string model_hash_;
  const bool no_compute_;
  const int64_t memory_limit_bytes_;
  const WeightStorage weights_;
  const DataDirs data_dirs_;
  PreparedSampleCache cache_;
  Mirror mirror_;  // set before use, then read-only
  mutable std::mutex mu_;
  struct LoadedJob {
    std::vector<CalibrationSample> samples;
    std::string description;
  };
  // guarded by mu_: each job's samples
  std::map<std::string, std::shared_ptr<const LoadedJob>> jobs_;
};

// Builds a job's calibration set from its data (see TaskRunner::LoadJob). Inline text and JSONL
// lines are parsed in memory (CalibrationDataFromText / CalibrationDataFromJsonl with source name
// "inline text" / "inline jsonl"); no temporary file is written. A path is read only through
// `data_dirs` (DataDirs::ReadFile: inside a data directory, a regular file, at most
// kMaxCalibrationJsonlBytes / kMaxCalibrationTextBytes) and parsed with the path as given as its
// source name; format kAuto goes by the given path's extension (IsJsonlPath).
// Errors: when the path is not read, whatever the reason, FailedPrecondition with exactly
// kDataPathRefused (the job's clients see it; the detail goes to this process's log only, with
// control characters escaped); otherwise those of the worker/data function for the source (a
// file's parse errors name the path as given), InvalidArgument for an unknown built-in corpus.
[[nodiscard]] StatusOr<CalibrationSet> BuildCalibrationSet(const JobData& data,
                                                           const Tokenizer& tokenizer,
                                                           DataOptions options,
                                                           const DataDirs& data_dirs = DataDirs());

// The KL a no-compute runner reports for a trial: positive, finite, a pure function of its
// arguments (so retries agree), growing with the layer.
double NoComputeKl(uint64_t seed, int sample, int layer, int trial);

// "job/sample": the prepared-cache key of a sample; "job/" prefixes all of a job's keys.
std::string SampleKey(const std::string& job_id, int sample);

}  // namespace ripplekv::worker
