// End to end through real processes on loopback: ripplekv-scheduler + 2 ripplekv-worker, a job
// submitted with `ripplekv submit --wait`, the profile fetched with `ripplekv profile get --json`,
// must equal local `ripplekv calibrate --json` bit for bit (docs/DESIGN.md §2, canonical
// aggregation); `ripplekv tasks` then names, for every task, a worker of the cluster and the
// version it runs; the same for a response calibration. Needs RIPPLEKV_SMOLLM2_GGUF; skipped
// without it. Every process is killed on every path.

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

  // Who measured what: every task done by one of the two workers, at this build's version.
  const CliResult version = RunCli(tmp.path(), "version", {"--version"}, std::chrono::seconds(10));
  ASSERT_EQ(version.exit_code, 0) << version.err;
  const std::string first_line = version.out.substr(0, version.out.find('\n'));  // ripplekv V
  const size_t revision_at = version.out.find("revision ") + std::string("revision ").size();
  const std::string revision =
      version.out.substr(revision_at, version.out.find(',', revision_at) - revision_at);
  const std::string worker_version = first_line + " (" + revision + ")";
  const CliResult jobs =
      RunCli(tmp.path(), "jobs", {"jobs", "--scheduler", cluster.address(), "--json"},
             std::chrono::seconds(10));
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  const nlohmann::json all_jobs = nlohmann::json::parse(jobs.out, nullptr, false);
  ASSERT_TRUE(!all_jobs.is_discarded() && all_jobs.contains("jobs") && all_jobs["jobs"].size() == 1)
      << jobs.out;
  const std::string job_id = all_jobs["jobs"][0]["job_id"].get<std::string>();
  const CliResult tasks_json =
      RunCli(tmp.path(), "tasks", {"tasks", "--scheduler", cluster.address(), job_id, "--json"},
             std::chrono::seconds(10));
  ASSERT_EQ(tasks_json.exit_code, 0) << tasks_json.err;
  const nlohmann::json tasks = nlohmann::json::parse(tasks_json.out, nullptr, false);
  ASSERT_TRUE(!tasks.is_discarded() && tasks.contains("tasks")) << tasks_json.out;
  ASSERT_EQ(tasks["tasks"].size(), 6u) << "2 samples x 3 layers: " << tasks_json.out;
  for (const nlohmann::json& task : tasks["tasks"]) {
    EXPECT_EQ(task.value("state", ""), "TASK_STATE_DONE") << task.dump();
    const std::string by = task.value("completed_by", "");
    EXPECT_TRUE(by == "worker-1" || by == "worker-2") << task.dump();
    EXPECT_EQ(task.value("completed_by_version", ""), worker_version) << task.dump();
  }
  const CliResult table =
      RunCli(tmp.path(), "tasks-table", {"tasks", "--scheduler", cluster.address(), job_id},
             std::chrono::seconds(10));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  int counted = 0;
  for (size_t at = table.out.find("done by "); at != std::string::npos;
       at = table.out.find("done by ", at + 1)) {
    const size_t colon = table.out.find("): ", at);
    ASSERT_NE(colon, std::string::npos) << table.out;
    EXPECT_NE(table.out.substr(at, colon - at).find(worker_version), std::string::npos)
        << table.out;
    counted += std::stoi(table.out.substr(colon + 3));
  }
  EXPECT_EQ(counted, 6) << table.out;

  cluster.StopAll();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(90));
}

// The response objective (docs/CALIBRATION.md, "Response profiles") needs no special case in the
// service: its budgets are the task's trials, so a job's profile equals the local one bit for bit.
// A response job (per layer, or per KV head with --per-head) through a scheduler and two workers
// equals local calibration bit for bit.
void ExpectResponseJobEqualsLocal(bool per_head) {
  const std::string model = TestModelPath();
  if (model.empty()) {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
  }
  std::vector<std::string> params = {"--objective", "response", "--selector",    "h2o",
                                     "--samples",   "2",        "--context-len", "64",
                                     "--probe",     "8",        "--layers",      "0,29"};
  if (per_head) params.push_back("--per-head");
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
  submit.insert(submit.end(), params.begin(), params.end());
  const CliResult job = RunCli(tmp.path(), "submit", submit, std::chrono::seconds(60));
  ASSERT_EQ(job.exit_code, 0) << job.err << cluster.Logs();

  const nlohmann::json local = LocalCalibrateJson(tmp.path(), model, params);
  ASSERT_FALSE(local.is_null());
  // H2O's grid at C = 64: 16, 32 and the full cache; per head, once for each of the 3 KV heads.
  EXPECT_EQ(local["params"]["objective"], "response");
  EXPECT_EQ(local["params"]["budgets"], nlohmann::json::array({16, 32, 64}));
  EXPECT_EQ(local["params"]["trials"], per_head ? 9 : 3);
  EXPECT_EQ(local["params"].value("kv_heads", 0), per_head ? 3 : 0);
  for (const nlohmann::json& layer : local["layers"]) {
    ASSERT_EQ(layer["response"].size(), 3u) << layer.dump();
    EXPECT_GT(layer["response"][0]["mean_kl"].get<double>(), 0.0) << layer.dump();
    EXPECT_EQ(layer["response"][2]["mean_kl"].get<double>(), 0.0) << layer.dump();
    ASSERT_EQ(layer.value("head_response", nlohmann::json::array()).size(), per_head ? 3u : 0u);
    if (!per_head) continue;
    // The layer's points are its heads' summed per sample, so their means add up.
    double sum = 0.0;
    for (const nlohmann::json& head : layer["head_response"]) {
      EXPECT_GT(head[0]["mean_kl"].get<double>(), 0.0) << layer.dump();
      sum += head[0]["mean_kl"].get<double>();
    }
    EXPECT_NEAR(layer["response"][0]["mean_kl"].get<double>(), sum, 1e-12 * sum);
  }
  const nlohmann::json remote =
      FetchProfileJson(tmp.path(), cluster.address(), local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster.Logs();
  ExpectSameProfile(remote, local, /*layers=*/2);  // head points included, to the bit
  cluster.StopAll();
}

TEST(ClusterE2eTest, ResponseJobEqualsLocalCalibrateBitForBit) {
  ExpectResponseJobEqualsLocal(/*per_head=*/false);
}

TEST(ClusterE2eTest, PerHeadResponseJobEqualsLocalCalibrateBitForBit) {
  ExpectResponseJobEqualsLocal(/*per_head=*/true);
}

}  // namespace
}  // namespace ripplekv::testing
