// ripplekv-store-history DB N [--inline-bytes B]: writes N finished jobs into the scheduler
// database DB (created if missing, closed on exit), each with B bytes of inline data (default
// 16384) and one task whose 2 trials are stored, then moved to FAILED. A history for
// bench/scheduler_overhead.py --history: hand-out latency with and without it.

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "store/store.h"

namespace {

int Fail(const ripplekv::Status& status) {
  std::fprintf(stderr, "ripplekv-store-history: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ripplekv;
  std::string db;
  uint64_t jobs = 0;
  size_t inline_bytes = 16384;
  CLI::App app{"ripplekv-store-history: a history of finished jobs for the scheduler benchmark"};
  app.add_option("db", db, "scheduler database directory")->required();
  app.add_option("jobs", jobs, "finished jobs to write")->required();
  app.add_option("--inline-bytes", inline_bytes, "inline data per job, bytes")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Unsynced: a benchmark fixture, written once before the scheduler opens the database.
  StatusOr<std::unique_ptr<store::Store>> store =
      store::OpenStore(db, {.create_if_missing = true, .sync_writes = false});
  if (!store.ok()) return Fail(store.status());
  store::JobSpec spec;
  spec.model_hash = std::string(64, 'e');  // no worker holds it: the history is inert
  spec.data_inline.assign(inline_bytes, 'h');
  spec.data_format = store::DataFormat::kText;
  spec.params.trials = 2;
  spec.params.samples = 1;
  const std::vector<store::PlannedTask> tasks = {{.sample = 0, .layer = 0}};
  for (uint64_t i = 0; i < jobs; ++i) {
    StatusOr<store::CreateJobOutcome> created = (*store)->CreateJob(spec, tasks);
    if (!created.ok()) return Fail(created.status());
    const store::TaskKey key{created->job.id, 0, 0};
    if (Status s = (*store)->LeaseTask(key, "history", 1).status(); !s.ok()) return Fail(s);
    const std::vector<store::TrialResult> results = {{key.job, 0, 0, 0, 0.5},
                                                     {key.job, 0, 0, 1, 0.25}};
    if (Status s = (*store)->CompleteTask(key, results).status(); !s.ok()) return Fail(s);
    Status s = (*store)->UpdateJobState(key.job, store::JobState::kFailed, "history").status();
    if (!s.ok()) return Fail(s);
  }
  std::printf("%llu finished jobs written to %s\n", static_cast<unsigned long long>(jobs),
              db.c_str());
  return 0;
}
