// A tensor-parallel worker group through the real service (label mpi; needs
// RIPPLEKV_SMOLLM2_GGUF): `mpirun -np 2 ripplekv-worker --tp 2` next to a whole-model worker
// serves a job whose profile equals local calibrate within 1e-4 relative per layer (the split sums
// partial products in another order); kill -9 of the group's rank 1 mid-job ends the group, the
// scheduler re-leases its task and the job completes on another worker; 4 ranks with --tp 2 form two
// workers.

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> kParams = {"--samples", "2", "--context-len", "128", "--probe",
                                          "8",  "--trials",  "2", "--seed", "5", "--alpha", "0.5"};
constexpr int kLayers = 30;

const std::vector<std::string> kMpirun = {RIPPLEKV_MPIEXEC, "-np", "2", "--oversubscribe"};
const std::vector<std::string> kTp2 = {"--tp", "2"};

// Per layer within `tolerance` relative, every trial counted once, the same parameters and model.
void ExpectCloseProfile(const nlohmann::json& remote, const nlohmann::json& local,
                        double tolerance) {
  ASSERT_EQ(remote["layers"].size(), local["layers"].size()) << remote.dump();
  for (size_t i = 0; i < local["layers"].size(); ++i) {
    const double want = local["layers"][i]["mean_kl"], got = remote["layers"][i]["mean_kl"];
    EXPECT_NEAR(got, want, tolerance * want) << "layer " << i;
    EXPECT_EQ(remote["layers"][i]["count"], local["layers"][i]["count"]);
  }
  EXPECT_EQ(remote["params"], local["params"]);
  EXPECT_EQ(remote["model"], local["model"]);
}

// The pid of the process whose environment has OMPI_COMM_WORLD_RANK=`rank` and whose command
// line holds `marker` (the worker id), or -1.
pid_t MpiRankPid(int rank, const std::string& marker) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  DIR* proc = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = proc != nullptr ? ::readdir(proc) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    const std::string cmdline = ReadFile(base + "/cmdline"), environ = ReadFile(base + "/environ");
    if (cmdline.find(marker) == std::string::npos) continue;
    for (size_t at = 0; at < environ.size();) {
      const size_t end = environ.find('\0', at);
      if (environ.compare(at, (end == std::string::npos ? environ.size() : end) - at, want) == 0) {
        found = pid;
      }
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  if (proc != nullptr) ::closedir(proc);
  return found;
}

class ClusterTpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    // Open MPI refuses root without these (CI runs as root); mpirun passes them to the ranks.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
    cluster_->StartScheduler();
    ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }
  std::string Submit(bool wait) {
    std::vector<std::string> args = {"submit", "--scheduler", cluster_->address(), "--model",
                                     model_};
    if (wait) args.push_back("--wait");
    args.insert(args.end(), kParams.begin(), kParams.end());
    const CliResult r = RunCli(tmp_.path(), "submit", args, seconds(240));
    EXPECT_EQ(r.exit_code, 0) << r.err << cluster_->Logs();
    std::string id = r.out;  // without --wait: the job id alone
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }
  void ExpectProfileCloseToLocalCalibrate() {
    const nlohmann::json local = LocalCalibrateJson(tmp_.path(), model_, kParams);
    ASSERT_FALSE(local.is_null());
    const nlohmann::json remote = FetchProfileJson(tmp_.path(), cluster_->address(),
                                                   local["model"]["hash"].get<std::string>());
    ASSERT_FALSE(remote.is_null()) << cluster_->Logs();
    ASSERT_EQ(local["layers"].size(), static_cast<size_t>(kLayers));
    ExpectCloseProfile(remote, local, 1e-4);
  }

  std::string model_;
  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(ClusterTpTest, AGroupOfTwoRanksAndAWholeWorkerMatchLocalCalibrate) {
  cluster_->StartWorker("worker-tp", model_, kMpirun, kTp2);
  cluster_->StartWorker("worker-whole", model_);
  ASSERT_TRUE(cluster_->Registered("worker-tp", seconds(60)) &&
              cluster_->Registered("worker-whole", seconds(60)))
      << cluster_->Logs();
  Submit(/*wait=*/true);
  ExpectProfileCloseToLocalCalibrate();
  const std::string log = cluster_->WorkerLog("worker-tp");
  EXPECT_NE(log.find("tensor-parallel group worker-tp of 2 ranks"), std::string::npos) << log;
  static const std::regex task_line(R"(task \S+ \(job \d+, sample \d+, layer \d+,)");
  const auto tasks =
      std::distance(std::sregex_iterator(log.begin(), log.end(), task_line), std::sregex_iterator());
  EXPECT_GT(tasks, 0) << "the group ran no task";
  // It registered as one worker of 2 ranks.
  const std::string scheduler_log =
      ReadFile(tmp_.path() / "scheduler-0.out") + ReadFile(tmp_.path() / "scheduler-0.err");
  static const std::regex registered(
      R"(worker worker-tp registered .*cpu, 2 tensor-parallel ranks)");
  EXPECT_TRUE(std::regex_search(scheduler_log, registered)) << scheduler_log;
  std::cout << "the group of 2 ranks ran " << tasks << " of " << 2 * kLayers << " tasks\n";
  // SIGTERM to mpirun reaches both ranks: rank 0 drains and dismisses rank 1, and the job ends
  // without a rank killed or aborted. (mpirun itself exits 1 after a SIGTERM whatever its ranks
  // did, so its exit code says nothing here.)
  Process& group = cluster_->worker("worker-tp");
  group.Stop(seconds(20));
  EXPECT_TRUE(group.Wait(seconds(0)).has_value());
  const std::string final_log = cluster_->WorkerLog("worker-tp");
  EXPECT_NE(final_log.find("drained; exiting"), std::string::npos) << final_log;
  EXPECT_EQ(final_log.find("exited on signal"), std::string::npos) << final_log;
  EXPECT_EQ(final_log.find("MPI_ABORT"), std::string::npos) << final_log;
}

// A world of 4 ranks with --tp 2 forms two workers of 2 ranks, ID-g0 and ID-g1, which share a job.
TEST_F(ClusterTpTest, FourRanksFormTwoWorkersOfTwo) {
  const std::vector<std::string> four = {RIPPLEKV_MPIEXEC, "-np", "4", "--oversubscribe"};
  cluster_->StartWorker("pair", model_, four, kTp2);
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = ReadFile(tmp_.path() / "scheduler-0.out") +
                                ReadFile(tmp_.path() / "scheduler-0.err");
        return log.find("worker pair-g0 registered") != std::string::npos &&
               log.find("worker pair-g1 registered") != std::string::npos;
      },
      seconds(90), milliseconds(100)))
      << cluster_->Logs();
  Submit(/*wait=*/true);
  ExpectProfileCloseToLocalCalibrate();
}

TEST_F(ClusterTpTest, KillingRankOneMidJobEndsTheGroupAndTheJobCompletesElsewhere) {
  Process& group = cluster_->StartWorker("worker-tp-kill", model_, kMpirun, kTp2);
  ASSERT_TRUE(cluster_->Registered("worker-tp-kill", seconds(60))) << cluster_->Logs();
  const std::string job = Submit(/*wait=*/false);
  ASSERT_FALSE(job.empty());
  static const std::regex task_line(R"(task \S+ \(job \d+, sample \d+, layer \d+,)");
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = cluster_->WorkerLog("worker-tp-kill");
        return std::distance(std::sregex_iterator(log.begin(), log.end(), task_line),
                             std::sregex_iterator()) >= 3;
      },
      seconds(120), milliseconds(5)))
      << cluster_->Logs();
  const pid_t rank1 = MpiRankPid(1, "worker-tp-kill");
  ASSERT_GT(rank1, 0) << "rank 1 of the group not found";
  ::kill(rank1, SIGKILL);
  // mpirun ends the group (rank 0 too) once a rank died.
  EXPECT_TRUE(group.Wait(seconds(30)).has_value()) << cluster_->Logs();
  cluster_->StartWorker("worker-after", model_);
  const CliResult watched = RunCli(tmp_.path(), "watch",
                                   {"watch", "--scheduler", cluster_->address(), job},
                                   seconds(300));
  ASSERT_EQ(watched.exit_code, 0) << watched.out << watched.err << cluster_->Logs();
  ExpectProfileCloseToLocalCalibrate();
}

}  // namespace
}  // namespace ripplekv::testing
