// Write throughput of the scheduler's store (store/store.h) on a real RocksDB in $TMPDIR:
// CompleteTask batches per second (one atomic write: the task's trial results, the task's state
// and the job's counters), a full dispatch cycle (LeaseTask + CompleteTask), and single streamed
// results (PutResults). Arguments: trials per task, sync_writes (0/1), and for CompleteTask the
// KiB of inline calibration data in the job (kept out of the record rewritten per completion).
// Also the read the scheduler makes per task hand-out: ListJobs(active_only) with and without
// a history of finished jobs.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace {

using namespace ripplekv::store;

// Tasks per job; a new job is planned (untimed) whenever they run out.
constexpr uint32_t kLayersPerJob = 4096;

class Fixture {
 public:
  Fixture(uint32_t trials, bool sync, size_t inline_bytes = 0)
      : trials_(trials), data_(inline_bytes, 'x') {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/ripplekv_bench_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
    auto opened = OpenStore(dir_ + "/db", {.sync_writes = sync});
    if (opened.ok()) store_ = *std::move(opened);
  }
  ~Fixture() {
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return store_ != nullptr; }
  Store& store() { return *store_; }

  // The next task never completed, in a running job.
  TaskKey Next() {
    if (job_ == kNoJob || layer_ == kLayersPerJob - 1) {
      JobSpec spec;
      spec.model_hash = "bench";
      spec.params.trials = trials_;
      spec.data_inline = data_;
      std::vector<PlannedTask> tasks;
      for (uint32_t l = 0; l < kLayersPerJob; ++l) tasks.push_back({.sample = 0, .layer = l});
      auto created = store_->CreateJob(spec, tasks);
      job_ = created.ok() ? created->job.id : kNoJob;
      layer_ = 0;
      // Leasing the last task starts the job, so the others can be completed without a lease.
      if (!store_->LeaseTask({.job = job_, .sample = 0, .layer = kLayersPerJob - 1}, "w", 1).ok()) {
        job_ = kNoJob;
      }
    }
    return {.job = job_, .sample = 0, .layer = layer_++};
  }

  std::vector<TrialResult> Results(const TaskKey& key) const {
    std::vector<TrialResult> out;
    for (uint32_t t = 0; t < trials_; ++t) {
      out.push_back({.job = key.job,
                     .sample = key.sample,
                     .layer = key.layer,
                     .trial = t,
                     .kl = 0.01 * t + 1e-4 * key.layer});
    }
    return out;
  }

 private:
  uint32_t trials_;
  std::string data_;  // each job's inline calibration data
  std::string dir_;
  std::unique_ptr<Store> store_;
  JobId job_ = kNoJob;
  uint32_t layer_ = 0;
};

void BM_CompleteTask(benchmark::State& state) {
  Fixture f(static_cast<uint32_t>(state.range(0)), state.range(1) != 0,
            static_cast<size_t>(state.range(2)) << 10);
  if (!f.ok()) return state.SkipWithError("cannot open the store");
  for (auto _ : state) {
    state.PauseTiming();
    const TaskKey key = f.Next();
    const std::vector<TrialResult> results = f.Results(key);
    state.ResumeTiming();
    if (!f.store().CompleteTask(key, results).ok()) return state.SkipWithError("CompleteTask");
  }
  state.SetItemsProcessed(state.iterations());  // batches
  state.counters["results/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}

void BM_LeaseAndCompleteTask(benchmark::State& state) {
  Fixture f(static_cast<uint32_t>(state.range(0)), state.range(1) != 0);
  if (!f.ok()) return state.SkipWithError("cannot open the store");
  for (auto _ : state) {
    state.PauseTiming();
    const TaskKey key = f.Next();
    const std::vector<TrialResult> results = f.Results(key);
    state.ResumeTiming();
    if (!f.store().LeaseTask(key, "worker-1", 1).ok()) return state.SkipWithError("LeaseTask");
    if (!f.store().CompleteTask(key, results).ok()) return state.SkipWithError("CompleteTask");
  }
  state.SetItemsProcessed(state.iterations());  // tasks
}

void BM_PutOneResult(benchmark::State& state) {
  const uint32_t trials = static_cast<uint32_t>(state.range(0));
  Fixture f(trials, state.range(1) != 0);
  if (!f.ok()) return state.SkipWithError("cannot open the store");
  TaskKey key = f.Next();
  uint32_t trial = 0;
  for (auto _ : state) {
    if (trial == trials) {
      state.PauseTiming();
      key = f.Next();
      trial = 0;
      state.ResumeTiming();
    }
    const TrialResult r{
        .job = key.job, .sample = 0, .layer = key.layer, .trial = trial++, .kl = 0.5};
    if (!f.store().PutResults({&r, 1}).ok()) return state.SkipWithError("PutResults");
  }
  state.SetItemsProcessed(state.iterations());  // results
}

// ListJobs with `range(0)` finished (cancelled) jobs in history and 8 active ones, each with
// 4 KiB of inline data; range(1): 1 = active_only (what the scheduler calls per hand-out and
// tick, read through the active-job index), 0 = every job (the full scan active_only was
// before the index).
void BM_ListJobs(benchmark::State& state) {
  Fixture f(2, /*sync=*/false);
  if (!f.ok()) return state.SkipWithError("cannot open the store");
  JobSpec spec;
  spec.model_hash = "bench";
  spec.data_inline = std::string(4096, 'x');
  const std::vector<PlannedTask> tasks = {{.sample = 0, .layer = 0}};
  const int64_t finished = state.range(0);
  for (int64_t i = 0; i < finished + 8; ++i) {
    auto created = f.store().CreateJob(spec, tasks);
    if (!created.ok()) return state.SkipWithError("CreateJob");
    if (i < finished && !f.store().UpdateJobState(created->job.id, JobState::kCancelled).ok()) {
      return state.SkipWithError("UpdateJobState");
    }
  }
  const ListJobsOptions options{.active_only = state.range(1) != 0};
  for (auto _ : state) {
    auto jobs = f.store().ListJobs(options);
    if (!jobs.ok()) return state.SkipWithError("ListJobs");
    benchmark::DoNotOptimize(jobs->data());
  }
}

}  // namespace

BENCHMARK(BM_ListJobs)->ArgsProduct({{0, 10000}, {1, 0}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompleteTask)->ArgsProduct({{2, 8, 32}, {0, 1}, {0}})->UseRealTime();
BENCHMARK(BM_CompleteTask)->Args({8, 0, 1024})->UseRealTime();
BENCHMARK(BM_LeaseAndCompleteTask)->ArgsProduct({{8}, {0, 1}})->UseRealTime();
BENCHMARK(BM_PutOneResult)->ArgsProduct({{8}, {0, 1}})->UseRealTime();

BENCHMARK_MAIN();
