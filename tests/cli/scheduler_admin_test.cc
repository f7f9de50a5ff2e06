// The operator's commands against a real ripplekv-scheduler on loopback, no model needed:
//   * `ripplekv health` prints SERVING and exits 0 while the scheduler runs (for the server and
//     for each service), exits 2 for a service it does not know, and 3 against a closed port or
//     a scheduler that is gone;
//   * `ripplekv-scheduler --db PATH --checkpoint DIR` refuses while a scheduler holds the
//     database, saying so, and afterwards writes a checkpoint a scheduler serves the same jobs
//     from;
//   * `ripplekv admin checkpoint` refuses a relative directory and a missing parent (exit 2,
//     the path named), writing nothing.
// Every process is killed on every path.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/store.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::seconds;

// A model hash no worker holds: its job stays pending, which is all these tests need.
const std::string kHash(64, 'a');

class SchedulerAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }

  CliResult Health(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"health", "--scheduler", cluster_->address(), "--timeout-ms",
                                     "2000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), "health", args, seconds(10));
  }

  // `ripplekv-scheduler --db DB --checkpoint DIR`, to completion.
  CliResult OfflineCheckpoint(const fs::path& db, const fs::path& dir) {
    const fs::path out = tmp_.path() / "offline.out", err = tmp_.path() / "offline.err";
    CliResult r;
    {
      Process p({RIPPLEKV_SCHEDULER, "--db", db.string(), "--checkpoint", dir.string()}, out, err);
      r.exit_code = p.Wait(std::chrono::seconds(30)).value_or(-1);
    }
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // Writes a pending job of kHash (2 samples x 2 layers) into the database before any scheduler
  // opens it: a job without a model or workers.
  void SeedPendingJob() {
    StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(cluster_->db().string());
    ASSERT_TRUE(db.ok()) << db.status();
    store::JobSpec spec;
    spec.model_path = (tmp_.path() / "absent.gguf").string();
    spec.model_hash = kHash;
    spec.params.samples = 2;
    spec.params.trials = 2;
    const std::vector<store::PlannedTask> tasks = {{.sample = 0, .layer = 0},
                                                   {.sample = 0, .layer = 1},
                                                   {.sample = 1, .layer = 0},
                                                   {.sample = 1, .layer = 1}};
    ASSERT_TRUE((*db)->CreateJob(spec, tasks).ok());
  }

  // The ids of the jobs `ripplekv jobs --json` lists.
  std::vector<std::string> JobIds() {
    const CliResult r = RunCli(tmp_.path(), "jobs",
                               {"jobs", "--scheduler", cluster_->address(), "--json"}, seconds(10));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> ids;
    const nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    if (all.is_discarded() || !all.contains("jobs")) return ids;
    for (const auto& job : all["jobs"]) ids.push_back(job.value("job_id", ""));
    return ids;
  }

  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SchedulerAdminTest, HealthIsServingWhileTheSchedulerRunsAndFailsWithoutIt) {
  const CliResult closed = Health();  // nothing listens on the port yet
  EXPECT_EQ(closed.exit_code, 3) << closed.out << closed.err;
  EXPECT_EQ(closed.out, "");
  EXPECT_NE(closed.err.find("UNAVAILABLE"), std::string::npos) << closed.err;

  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const CliResult serving = Health();
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  for (const char* service : {"ripplekv.v1.CalibrationService", "ripplekv.v1.WorkerService",
                              "ripplekv.v1.RolloutService", "ripplekv.v1.AdminService"}) {
    const CliResult one = Health({"--service", service});
    EXPECT_EQ(one.exit_code, 0) << service << one.err;
    EXPECT_EQ(one.out, "SERVING\n") << service;
  }
  const CliResult unknown = Health({"--service", "no.such.Service"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("NOT_FOUND"), std::string::npos) << unknown.err;

  cluster_->scheduler().Kill();
  const CliResult gone = Health();
  EXPECT_EQ(gone.exit_code, 3) << gone.out << gone.err;
}

TEST_F(SchedulerAdminTest, OfflineCheckpointRefusesAHeldDatabaseAndWorksOnceItIsFree) {
  SeedPendingJob();
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const std::vector<std::string> jobs = JobIds();
  ASSERT_EQ(jobs.size(), 1u);

  const fs::path checkpoint = tmp_.path() / "offline-checkpoint";
  const CliResult held = OfflineCheckpoint(cluster_->db(), checkpoint);
  EXPECT_EQ(held.exit_code, 1) << held.out << held.err;
  EXPECT_NE(held.err.find("another process holds the database"), std::string::npos) << held.err;
  EXPECT_FALSE(fs::exists(checkpoint));

  cluster_->scheduler().Stop(seconds(10));
  const CliResult made = OfflineCheckpoint(cluster_->db(), checkpoint);
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_TRUE(made.out.starts_with("checkpoint " + checkpoint.string() + " ")) << made.out;
  EXPECT_TRUE(fs::exists(checkpoint / "CURRENT"));
  // Once more into the same directory: refused, the path named.
  const CliResult again = OfflineCheckpoint(cluster_->db(), checkpoint);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find(checkpoint.string()), std::string::npos) << again.err;
  // No database at all: refused without creating one.
  const CliResult none = OfflineCheckpoint(tmp_.path() / "no-db", tmp_.path() / "other");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_FALSE(fs::exists(tmp_.path() / "no-db"));

  // Restore: a scheduler on the checkpoint serves the job.
  cluster_->StartScheduler(checkpoint);
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  EXPECT_EQ(JobIds(), jobs);
}

TEST_F(SchedulerAdminTest, OnlineCheckpointRefusesBadDirectoriesAndWritesNothing) {
  cluster_->StartScheduler();
  ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(10))) << cluster_->Logs();
  const auto checkpoint = [&](const std::string& dir) {
    return RunCli(tmp_.path(), "checkpoint",
                  {"admin", "checkpoint", "--scheduler", cluster_->address(), dir}, seconds(30));
  };
  const CliResult relative = checkpoint("relative-checkpoint");
  EXPECT_EQ(relative.exit_code, 2) << relative.err;
  EXPECT_NE(relative.err.find("INVALID_ARGUMENT"), std::string::npos) << relative.err;
  EXPECT_NE(relative.err.find("relative-checkpoint"), std::string::npos) << relative.err;

  const fs::path orphan = tmp_.path() / "missing" / "checkpoint";
  const CliResult orphaned = checkpoint(orphan.string());
  EXPECT_EQ(orphaned.exit_code, 2) << orphaned.err;
  EXPECT_NE(orphaned.err.find(orphan.string()), std::string::npos) << orphaned.err;
  EXPECT_FALSE(fs::exists(tmp_.path() / "missing"));

  const fs::path good = tmp_.path() / "online-checkpoint";
  const CliResult made = checkpoint(good.string());
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(made.out.starts_with("checkpoint " + good.string() + " ")) << made.out;
}

}  // namespace
}  // namespace ripplekv::testing
