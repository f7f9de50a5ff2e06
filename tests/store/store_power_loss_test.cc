// Power loss: the store runs over a file system that drops everything not synced at a power cut
// (tests/store/power_loss_fs.h). A seeded random workload of job creations, leases, streamed
// results, task completions, profile versions and state changes records what each call
// acknowledged; the power is cut at a random point, the store reopened on what a disk would
// hold, and every acknowledged job, completed task (with all its results) and profile version
// must be there, byte-equal. With sync_writes off the same harness must find a loss, which shows
// that it can.

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "base/strings.h"
#include "store/rocks_store.h"
#include "store/store.h"
#include "tests/store/power_loss_fs.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::PowerLossFs;
using ::ripplekv::store::testing::TempDir;

double Kl(const TaskKey& key, uint32_t trial) {
  return 1.0 / 7.0 + 0.001 * key.sample + 0.01 * key.layer + 1e-6 * trial + 1e-9 * key.job;
}

std::vector<TrialResult> Trials(const TaskKey& key, uint32_t trials) {
  std::vector<TrialResult> out;
  for (uint32_t t = 0; t < trials; ++t) {
    out.push_back(
        {.job = key.job, .sample = key.sample, .layer = key.layer, .trial = t, .kl = Kl(key, t)});
  }
  return out;
}

// What the store acknowledged (returned OK for) and so must keep.
struct Acknowledged {
  std::map<JobId, JobSpec> jobs;
  std::map<JobId, JobState> final_states;
  std::map<TaskKey, std::vector<TrialResult>> completed;
  std::map<std::pair<std::string, uint32_t>, ProfileVersion> profiles;
};

// Every acknowledged change `store` lacks or holds differently, one line each.
std::vector<std::string> FindLosses(const Store& store, const Acknowledged& ack) {
  std::vector<std::string> losses;
  for (const auto& [id, spec] : ack.jobs) {
    StatusOr<Job> job = store.GetJob(id);
    if (!job.ok()) {
      losses.push_back(Cat("job ", id, ": ", job.status().ToString()));
    } else if (!(job->spec == spec)) {
      losses.push_back(Cat("job ", id, ": spec differs"));
    }
  }
  for (const auto& [id, state] : ack.final_states) {
    StatusOr<Job> job = store.GetJobMeta(id);
    if (!job.ok() || job->state != state) {
      losses.push_back(Cat("job ", id, ": not ", JobStateName(state)));
    }
  }
  for (const auto& [key, results] : ack.completed) {
    StatusOr<Task> task = store.GetTask(key);
    StatusOr<std::vector<TrialResult>> stored = store.ListTaskResults(key);
    if (!task.ok() || task->state != TaskState::kDone || !stored.ok() || *stored != results) {
      losses.push_back(Cat("task job=", key.job, " sample=", key.sample, " layer=", key.layer,
                           ": not done with all its results"));
    }
  }
  for (const auto& [hash_version, profile] : ack.profiles) {
    StatusOr<ProfileVersion> stored = store.GetProfile(hash_version.first, hash_version.second);
    if (!stored.ok() || !(*stored == profile)) {
      losses.push_back(Cat("profile ", hash_version.first, " version ", hash_version.second));
    }
  }
  // The active index agrees with the job records.
  StatusOr<std::vector<Job>> all = store.ListJobs();
  StatusOr<std::vector<Job>> active = store.ListJobs({.active_only = true});
  if (!all.ok() || !active.ok()) {
    losses.push_back("ListJobs failed");
  } else {
    std::erase_if(*all, [](const Job& job) { return IsTerminal(job.state); });
    if (*all != *active) losses.push_back("the active-job index disagrees with the job records");
  }
  return losses;
}

// Drives a random workload against the store until `ops` calls are made or a call fails.
// Returns false (after a test failure) when a call fails while the power is on.
class Workload {
 public:
  Workload(Store* store, PowerLossFs* fs, Acknowledged* ack, std::mt19937_64* rng)
      : store_(store), fs_(fs), ack_(ack), rng_(rng) {}

  // Runs until the power goes (the first failed call after the cut) or `ops` calls are made.
  void Run(int ops) {
    for (int i = 0; i < ops && !fs_->IsCut(); ++i) {
      Status s = Step();
      if (!s.ok()) {
        if (!fs_->IsCut()) ADD_FAILURE() << "a call failed with the power on: " << s;
        return;
      }
    }
  }

 private:
  uint32_t Uniform(uint32_t n) { return static_cast<uint32_t>((*rng_)() % n); }

  Status Step() {
    ASSIGN_OR_RETURN(std::vector<Job> active, store_->ListJobs({.active_only = true}));
    const uint32_t dice = Uniform(100);
    if (active.empty() || dice < 12) return Create();
    const Job& job = active[Uniform(static_cast<uint32_t>(active.size()))];
    if (dice < 16) {
      const JobState state = Uniform(2) == 0 ? JobState::kCancelled : JobState::kFailed;
      ASSIGN_OR_RETURN(Job updated, store_->UpdateJobState(job.id, state, "stopped"));
      ack_->final_states[job.id] = updated.state;
      return absl::OkStatus();
    }
    if (job.state == JobState::kRunning && job.tasks_done == job.tasks_total) {
      const std::string json = Cat("{\"job\":", job.id, ",\"layers\":[0.5,0.25]}");
      ASSIGN_OR_RETURN(ProfileVersion p,
                       store_->PutProfileVersion(job.spec.model_hash, json, job.id));
      ack_->profiles[{p.model_hash, p.version}] = p;
      ack_->final_states[job.id] = JobState::kSucceeded;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::vector<Task> tasks, store_->ListTasks(job.id));
    std::erase_if(tasks, [](const Task& t) { return t.state == TaskState::kDone; });
    if (tasks.empty()) return absl::OkStatus();
    const Task& task = tasks[Uniform(static_cast<uint32_t>(tasks.size()))];
    const uint32_t trials = job.spec.params.trials;
    if (task.state == TaskState::kPending) {
      return store_->LeaseTask(task.key, "worker", 1'000'000).status();
    }
    if (dice < 40) {  // stream some of the trials first
      std::vector<TrialResult> some = Trials(task.key, trials);
      some.resize(1 + Uniform(trials));
      return store_->PutResults(some).status();
    }
    std::vector<TrialResult> all = Trials(task.key, trials);
    RETURN_IF_ERROR(store_->CompleteTask(task.key, all).status());
    ack_->completed[task.key] = std::move(all);
    return absl::OkStatus();
  }

  Status Create() {
    JobSpec spec = MakeSpec(Cat("hash", Uniform(3)), 1 + Uniform(3));
    // Inline data of a few bytes to a few tens of KiB, so that records span WAL blocks.
    spec.data_inline = std::string(Uniform(4) == 0 ? 0 : 1 + Uniform(40'000), 'a' + Uniform(26));
    spec.priority = static_cast<int32_t>(Uniform(3));
    std::vector<PlannedTask> tasks;
    const uint32_t samples = 1 + Uniform(2);
    const uint32_t layers = 1 + Uniform(3);
    for (uint32_t s = 0; s < samples; ++s) {
      for (uint32_t l = 0; l < layers; ++l) tasks.push_back({.sample = s, .layer = l});
    }
    ASSIGN_OR_RETURN(CreateJobOutcome created, store_->CreateJob(spec, tasks));
    ack_->jobs[created.job.id] = spec;
    return absl::OkStatus();
  }

  Store* store_;
  PowerLossFs* fs_;
  Acknowledged* ack_;
  std::mt19937_64* rng_;
};

struct RunResult {
  int cuts = 0;               // power cuts simulated
  int cuts_with_losses = 0;   // of those, cuts after which an acknowledged change was missing
  int cuts_mid_workload = 0;  // cuts that fell inside the workload (not after its last call)
  std::string first_loss;
  Acknowledged acknowledged;
};

// `cuts` rounds of: open over a fresh PowerLossFs, run the workload with the power cut after a
// random number of file-system calls, close, drop what was not synced, reopen and check.
// Stops at the first round with a loss when `stop_at_loss`.
RunResult RunPowerCuts(bool sync_writes, int cuts, uint64_t seed, bool stop_at_loss) {
  TempDir dir;
  const StoreOptions options{.sync_writes = sync_writes};
  std::mt19937_64 rng(seed);
  RunResult result;
  Acknowledged& ack = result.acknowledged;
  for (int round = 0; round < cuts; ++round) {
    auto fs = std::make_shared<PowerLossFs>();
    std::shared_ptr<rocksdb::Env> env = testing::PowerLossEnv(fs);
    {
      StatusOr<std::unique_ptr<Store>> store = OpenRocksStore(dir.db(), options, env);
      if (!store.ok()) {
        ADD_FAILURE() << "round " << round
                      << ": the store does not open after a power cut: " << store.status();
        return result;
      }
      if (round > 0) {
        std::vector<std::string> losses = FindLosses(**store, ack);
        if (!losses.empty()) {
          ++result.cuts_with_losses;
          if (result.first_loss.empty()) result.first_loss = Cat("round ", round, ": ", losses[0]);
          if (stop_at_loss) return result;
        }
      }
      fs->CutAfter(1 + rng() % 300);
      Workload(store->get(), fs.get(), &ack, &rng).Run(/*ops=*/60);
      if (fs->IsCut()) ++result.cuts_mid_workload;
      fs->CutAfter(0);  // if the workload ended first, the power goes now
    }                   // closing the store writes nothing: the power is off
    fs->DropUnsynced();
    ++result.cuts;
  }
  return result;
}

TEST(StorePowerLossTest, EveryAcknowledgedChangeSurvivesPowerCutsWithSyncedWrites) {
  // How many cuts land inside the workload depends on RocksDB's background threads (their file
  // calls count towards the cut too): 9 to 17 of 25 per seed over repeated runs here. So the
  // floor is on both seeds together, well under the least seen (20 of 50) and far from 0, what a
  // harness whose cuts never fire mid-workload would give.
  int cuts_mid_workload = 0;
  for (uint64_t seed : {1u, 2u}) {
    const RunResult result = RunPowerCuts(/*sync_writes=*/true, /*cuts=*/25, seed,
                                          /*stop_at_loss=*/false);
    EXPECT_EQ(result.cuts, 25);
    EXPECT_EQ(result.cuts_with_losses, 0) << "seed " << seed << ", " << result.first_loss;
    // The workload reached every kind of acknowledged change.
    const Acknowledged& ack = result.acknowledged;
    EXPECT_GE(ack.jobs.size(), 10u);
    EXPECT_GE(ack.completed.size(), 20u);
    EXPECT_GE(ack.profiles.size(), 2u);
    EXPECT_GE(ack.final_states.size(), 4u);
    cuts_mid_workload += result.cuts_mid_workload;
    std::printf(
        "seed %lu: %d cuts (%d inside the workload); acknowledged %zu jobs, %zu task "
        "completions, %zu profiles, %zu final states\n",
        static_cast<unsigned long>(seed), result.cuts, result.cuts_mid_workload, ack.jobs.size(),
        ack.completed.size(), ack.profiles.size(), ack.final_states.size());
  }
  EXPECT_GE(cuts_mid_workload, 12) << "of 50 cuts, over both seeds";
}

TEST(StorePowerLossTest, UnsyncedWritesAreLostWhichTheHarnessDetects) {
  const RunResult result = RunPowerCuts(/*sync_writes=*/false, /*cuts=*/25, /*seed=*/3,
                                        /*stop_at_loss=*/true);
  EXPECT_GE(result.cuts_with_losses, 1) << "the harness found no lost write without fsync";
}

}  // namespace
}  // namespace ripplekv::store
