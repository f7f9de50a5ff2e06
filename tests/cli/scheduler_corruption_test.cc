// A real ripplekv-scheduler on a database whose write-ahead log has a flipped byte before its tail
// (intact records after it): the start exits 1 naming the log file, the offset and the flag that
// accepts the loss; with --accept-wal-loss it serves, logs what was dropped, and the ids of the
// jobs that were dropped are not handed out again (docs/OPERATIONS.md, "Corruption"). No model
// needed.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "store/store.h"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using std::chrono::seconds;

// The newest write-ahead log of the database at `db`.
std::string NewestLog(const fs::path& db) {
  std::vector<std::string> logs;
  for (const auto& entry : fs::directory_iterator(db)) {
    if (entry.path().extension() == ".log") logs.push_back(entry.path().string());
  }
  std::sort(logs.begin(), logs.end());
  return logs.empty() ? std::string() : logs.back();
}

TEST(SchedulerCorruptionTest, DamagedLogStopsTheStartUnlessTheLossIsAccepted) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  LocalCluster cluster(tmp.path());
  store::JobSpec spec;
  spec.model_path = (tmp.path() / "absent.gguf").string();
  spec.model_hash = std::string(64, 'a');
  spec.params.samples = 1;
  spec.params.trials = 2;
  const std::vector<store::PlannedTask> tasks = {{.sample = 0, .layer = 0}};

  // Five jobs, one synced log record each; ends[i]: the log's size after job i + 1.
  std::string log;
  std::vector<uintmax_t> ends;
  {
    StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(cluster.db().string());
    ASSERT_TRUE(db.ok()) << db.status();
    log = NewestLog(cluster.db());
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE((*db)->CreateJob(spec, tasks).ok());
      ASSERT_EQ(NewestLog(cluster.db()), log);
      ends.push_back(fs::file_size(log));
    }
  }
  {
    // A flipped byte inside job 2's record; jobs 3, 4 and 5 follow intact.
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(ends[1] - 3));
    const char byte = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(ends[1] - 3));
    f.put(byte);
    ASSERT_TRUE(f.good());
  }

  cluster.StartScheduler();
  EXPECT_EQ(cluster.scheduler().Wait(seconds(30)).value_or(-1), 1);
  const std::string refused = ReadFile(tmp.path() / "scheduler-0.err");
  EXPECT_NE(refused.find("write-ahead log " + log + " is damaged at offset " +
                         std::to_string(ends[0]) + " (checksum mismatch)"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("--accept-wal-loss"), std::string::npos) << refused;

  cluster.StartScheduler({}, {"--accept-wal-loss"});
  EXPECT_TRUE(cluster.SchedulerAnswers(seconds(30))) << ReadFile(tmp.path() / "scheduler-1.err");
  cluster.scheduler().Stop(seconds(10));
  // It logged what the accepted loss dropped, and the id counter it raised.
  const std::string accepted = ReadFile(tmp.path() / "scheduler-1.err");
  EXPECT_NE(accepted.find("store: write-ahead log " + log + " is damaged at offset " +
                          std::to_string(ends[0])),
            std::string::npos)
      << accepted;
  EXPECT_NE(accepted.find("the loss was accepted"), std::string::npos) << accepted;
  EXPECT_NE(accepted.find("job ids up to 5"), std::string::npos) << accepted;
  EXPECT_NE(accepted.find("the next job id was raised from 2 to 6"), std::string::npos) << accepted;

  // Job 1 is kept, 2..5 were dropped; the next job is 6, not 2.
  StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(cluster.db().string());
  ASSERT_TRUE(db.ok()) << db.status();
  StatusOr<std::vector<store::Job>> jobs = (*db)->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().id, 1u);
  StatusOr<store::CreateJobOutcome> next = (*db)->CreateJob(spec, tasks);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->job.id, 6u);
}

}  // namespace
}  // namespace ripplekv::testing
