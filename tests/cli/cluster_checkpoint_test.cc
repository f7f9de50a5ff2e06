// Backup and restore through real processes on loopback (docs/STORE.md, "Backup and restore"):
// a ripplekv-scheduler and one ripplekv-worker on SmolLM2 run a small job; once some but not all
// of its tasks are done, `ripplekv admin checkpoint` writes a checkpoint of the running
// scheduler's database under its --checkpoint-dir; then the scheduler and the worker are killed with SIGKILL, a new
// scheduler starts on the checkpoint directory and a new worker finishes the job. Its profile
// equals local `ripplekv calibrate --json` bit for bit, every trial counted once. Needs
// RIPPLEKV_SMOLLM2_GGUF; skipped without it. Every process is killed on every path.

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/model_cluster_test.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 2 samples x 30 layers = 60 tasks of 2 trials: some seconds of work on one thread, so the
// checkpoint, taken once the first task is done, falls well before the last.
const std::vector<std::string> kParams = {"--samples", "2", "--context-len", "64",
                                          "--probe",   "8", "--trials",      "2",
                                          "--seed",    "7", "--alpha",       "0.5"};
constexpr int kSamples = 2, kLayers = 30, kTrials = 2;
constexpr int kTasks = kSamples * kLayers;

class ClusterCheckpointTest : public ModelClusterTest {
 protected:
};

TEST_F(ClusterCheckpointTest, JobResumedFromACheckpointEqualsLocalCalibrateBitForBit) {
  const auto start = SteadyClock::now();
  const fs::path backups = tmp_.path() / "backups";  // online checkpoints go only under it
  cluster_->StartScheduler({}, {"--checkpoint-dir", backups.string()});
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  cluster_->StartWorker("worker-1", model_);
  ASSERT_TRUE(cluster_->Registered("worker-1", seconds(40))) << cluster_->Logs();

  std::vector<std::string> submit = {"submit", "--scheduler", cluster_->address(), "--model",
                                     model_};
  submit.insert(submit.end(), kParams.begin(), kParams.end());
  const CliResult submitted = RunCli(tmp_.path(), "submit", submit, seconds(60));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err << cluster_->Logs();
  std::string job = submitted.out;
  while (!job.empty() && (job.back() == '\n' || job.back() == ' ')) job.pop_back();
  ASSERT_FALSE(job.empty());

  // Checkpoint as soon as a task is done, with the worker inside the next one.
  int64_t done_before = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json j = Job(job);
        done_before = j.is_null() ? 0 : JsonInt(j, {"progress", "tasks_done"});
        return done_before >= 1;
      },
      seconds(60), milliseconds(20)))
      << cluster_->Logs();
  ASSERT_LT(done_before, kTasks) << "the job ended before the checkpoint; make it longer";
  const fs::path checkpoint = backups / "checkpoint";
  const CliResult made = RunCli(
      tmp_.path(), "checkpoint",
      {"admin", "checkpoint", "--scheduler", cluster_->address(), checkpoint.string(), "--json"},
      seconds(30));
  ASSERT_EQ(made.exit_code, 0) << made.err << cluster_->Logs();
  const nlohmann::json response = nlohmann::json::parse(made.out, nullptr, false);
  ASSERT_FALSE(response.is_discarded()) << made.out;
  EXPECT_EQ(response["dir"], checkpoint.string());
  EXPECT_GT(JsonInt(response, {"bytes"}), 0);
  EXPECT_GT(JsonInt(response, {"created_unix_ms"}), 0);
  EXPECT_EQ(response["schema_version"], "4");
  // A second checkpoint into the same directory is refused with the path named (exit 2).
  const CliResult again =
      RunCli(tmp_.path(), "checkpoint-again",
             {"admin", "checkpoint", "--scheduler", cluster_->address(), checkpoint.string()},
             seconds(30));
  EXPECT_EQ(again.exit_code, 2) << again.out << again.err;
  EXPECT_NE(again.err.find("ALREADY_EXISTS"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find(checkpoint.string()), std::string::npos) << again.err;

  cluster_->worker("worker-1").Kill();
  cluster_->scheduler().Kill();

  // A new scheduler on the checkpoint: the job is there, part done, before any worker runs.
  cluster_->StartScheduler(checkpoint);
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const nlohmann::json restored = Job(job);
  ASSERT_FALSE(restored.is_null()) << cluster_->Logs();
  const int64_t done_restored = JsonInt(restored, {"progress", "tasks_done"});
  EXPECT_GE(done_restored, done_before);
  EXPECT_LT(done_restored, kTasks);
  std::cout << "tasks done: " << done_before << " before the checkpoint, " << done_restored
            << " in it, of " << kTasks << "\n";

  cluster_->StartWorker("worker-2", model_);
  const CliResult watched = RunCli(
      tmp_.path(), "watch", {"watch", "--scheduler", cluster_->address(), job}, seconds(120));
  ASSERT_EQ(watched.exit_code, 0) << watched.out << watched.err << cluster_->Logs();
  const nlohmann::json finished = Job(job);
  ASSERT_FALSE(finished.is_null());
  EXPECT_EQ(finished["state"], "JOB_STATE_SUCCEEDED") << finished.dump();
  EXPECT_EQ(JsonInt(finished, {"progress", "trials_done"}), kTasks * kTrials);

  const nlohmann::json local = LocalCalibrateJson(tmp_.path(), model_, kParams);
  ASSERT_FALSE(local.is_null());
  const nlohmann::json remote =
      FetchProfileJson(tmp_.path(), cluster_->address(), local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster_->Logs();
  ExpectSameProfile(remote, local, kLayers);
  for (const auto& layer : remote["layers"]) {
    EXPECT_EQ(layer["count"], kSamples * kTrials);  // every trial once, none twice
  }
  cluster_->StopAll();
  EXPECT_LT(SteadyClock::now() - start, seconds(90));
}

}  // namespace
}  // namespace ripplekv::testing
