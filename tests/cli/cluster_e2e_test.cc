// End to end through real processes on loopback: ripplekv-scheduler + 2 ripplekv-worker, a job
// submitted with `ripplekv submit --wait`, the profile fetched with `ripplekv profile get --json`,
// must equal local `ripplekv calibrate --json` bit for bit (docs/DESIGN.md §2, canonical aggregation).
// Needs RIPPLEKV_SMOLLM2_GGUF; skipped without it. Every process is killed on every path.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

const std::vector<std::string> kParams = {
    "--samples", "2", "--context-len", "64", "--probe", "8",  "--layers", "0,7,29",
    "--trials",  "2", "--seed",        "3",  "--alpha", "0.5"};

TEST(ClusterE2eTest, TwoWorkerJobEqualsLocalCalibrateBitForBit) {
  const std::string model = TestModelPath();
  if (model.empty()) {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
  }
  const auto start = SteadyClock::now();
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  LocalCluster cluster(tmp.path());
  cluster.StartScheduler();
  cluster.StartWorker("worker-1", model);
  cluster.StartWorker("worker-2", model);
  ASSERT_TRUE(cluster.SchedulerAnswers(std::chrono::seconds(10))) << cluster.Logs();
  ASSERT_TRUE(cluster.Registered("worker-1", std::chrono::seconds(40)) &&
              cluster.Registered("worker-2", std::chrono::seconds(40)))
      << "workers did not register" << cluster.Logs();

  std::vector<std::string> submit = {"submit",  "--scheduler", cluster.address(),
                                     "--model", model,         "--wait"};
  submit.insert(submit.end(), kParams.begin(), kParams.end());
  const CliResult job = RunCli(tmp.path(), "submit", submit, std::chrono::seconds(60));
  ASSERT_EQ(job.exit_code, 0) << job.err << cluster.Logs();
  EXPECT_NE(job.out.find("mean KL"), std::string::npos) << job.out;

  const nlohmann::json local = LocalCalibrateJson(tmp.path(), model, kParams);
  ASSERT_FALSE(local.is_null());
  const nlohmann::json remote =
      FetchProfileJson(tmp.path(), cluster.address(), local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster.Logs();
  ExpectSameProfile(remote, local, /*layers=*/3);

  cluster.StopAll();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(90));
}

}  // namespace
}  // namespace ripplekv::testing
