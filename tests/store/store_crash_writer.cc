// Child process of store_crash_test: works through job 1 of the store at argv[1] the way a
// scheduler would (lease a task, store half of its trials as they stream in, complete it with the
// rest) until killed. Prints "ready <recovered leases>" once open and "done <sample> <layer>"
// after each CompleteTask has returned, so the parent knows what the store acknowledged.
//
// usage: store_crash_writer DB_PATH SYNC(0|1) SEED     exit: 0 all done, 2 error

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "store/store.h"

namespace {

using ripplekv::store::Store;
using ripplekv::store::TaskKey;
using ripplekv::store::TrialResult;

// Unbuffered, so that what the parent reads was printed before the kill.
void Say(const std::string& line) {
  const std::string text = line + "\n";
  if (write(STDOUT_FILENO, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::_Exit(2);
  }
}

int Fail(const ripplekv::Status& status) {
  std::fprintf(stderr, "store_crash_writer: %s\n", status.ToString().c_str());
  return 2;
}

}  // namespace

// The KL the parent expects for (sample, layer, trial).
double ExpectedKl(uint32_t sample, uint32_t layer, uint32_t trial) {
  return 1.0 / (1.0 + sample) + layer * 1e-3 + trial * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: store_crash_writer DB_PATH SYNC(0|1) SEED\n");
    return 2;
  }
  ripplekv::store::StoreOptions options;
  options.create_if_missing = false;
  options.sync_writes = std::string(argv[2]) == "1";
  auto opened = ripplekv::store::OpenStore(argv[1], options);
  if (!opened.ok()) return Fail(opened.status());
  Store& store = **opened;
  Say("ready " + std::to_string(store.RecoveredLeases()));

  auto job = store.GetJob(1);
  if (!job.ok()) return Fail(job.status());
  const uint32_t trials = job->spec.params.trials;
  auto tasks = store.ListTasks(1);
  if (!tasks.ok()) return Fail(tasks.status());
  std::mt19937 rng(static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)));
  std::shuffle(tasks->begin(), tasks->end(), rng);

  for (const auto& task : *tasks) {
    if (task.state == ripplekv::store::TaskState::kDone) continue;
    const TaskKey& key = task.key;
    auto leased = store.LeaseTask(key, "crash-writer", 1);
    if (!leased.ok()) return Fail(leased.status());
    std::vector<TrialResult> all;
    for (uint32_t t = 0; t < trials; ++t) {
      all.push_back({.job = key.job,
                     .sample = key.sample,
                     .layer = key.layer,
                     .trial = t,
                     .kl = ExpectedKl(key.sample, key.layer, t)});
    }
    const auto half = all.begin() + trials / 2;
    auto streamed = store.PutResults(std::vector<TrialResult>(all.begin(), half));
    if (!streamed.ok()) return Fail(streamed.status());
    auto done = store.CompleteTask(key, std::vector<TrialResult>(half, all.end()));
    if (!done.ok()) return Fail(done.status());
    Say("done " + std::to_string(key.sample) + " " + std::to_string(key.layer));
  }
  Say("finished");
  return 0;
}
