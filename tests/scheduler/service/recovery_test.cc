// The scheduler after a crash and over a long history, on a real server over RocksDB:
//   * crash at completion: the scheduler dies after storing a job's last task but before writing
//     its profile (reproduced exactly: the server stops, the last task is completed in the
//     database as that scheduler had, the server starts again) and no worker of the model comes
//     back: the timer writes exactly one profile and the job is SUCCEEDED;
//   * retention: the tasks and results of a finished job are deleted after retention_ms, while
//     the job record and its profile stay.

#include <string>
#include <vector>

#include "scheduler/service/convert.h"
#include "store/store.h"
#include "tests/scheduler/service/service_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

// Runs every task the worker is given with deterministic values until `tasks` are done.
void RunTasks(FakeWorker& worker, int tasks) {
  for (int done = 0; done < tasks; ++done) {
    std::vector<v1::TaskAssignment> next = worker.ReadAssignments(1);
    ASSERT_EQ(next.size(), 1u);
    const v1::TaskAssignment& t = next[0];
    for (int32_t trial = 0; trial < 2; ++trial) {
      ASSERT_TRUE(
          worker.Send(TrialResultMessage(t, trial, 0.25 * (t.layer() + 1) + 0.125 * trial)));
    }
    ASSERT_TRUE(worker.Send(TaskDoneMessage(t)));
  }
}

size_t ProfileCount(v1::CalibrationService::Stub* calibration) {
  v1::ListProfilesRequest request;
  request.set_model_hash(kHash);
  v1::ListProfilesResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  EXPECT_TRUE(calibration->ListProfiles(&context, request, &response).ok());
  return static_cast<size_t>(response.profiles_size());
}

class RecoveryTest : public ServiceFixture {};

TEST_F(RecoveryTest, CrashBetweenTheLastTaskAndTheProfileEndsWithExactlyOneProfile) {
  FakeWorker worker(workers_.get(), "w1", Register("w1", /*n_layers=*/2, /*capacity=*/1));
  const std::string job_id = SubmitOne();
  worker.Heartbeat(1);  // the job came after hello: a heartbeat fills the worker
  RunTasks(worker, 1);  // one of the two tasks through the service
  std::vector<v1::TaskAssignment> last = worker.ReadAssignments(1);
  ASSERT_EQ(last.size(), 1u);
  worker.Crash();
  StopServer();

  {  // What the crashed scheduler had made durable: the last task, without the profile.
    StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(options_.db_path);
    ASSERT_TRUE(db.ok()) << db.status();
    StatusOr<store::JobId> id = ParseJobId(job_id, "job_id");
    ASSERT_TRUE(id.ok());
    StatusOr<std::vector<store::Task>> tasks = (*db)->ListTasks(*id);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    int completed = 0;
    for (const store::Task& task : *tasks) {
      if (task.state == store::TaskState::kDone) continue;
      const store::TaskKey& key = task.key;
      ASSERT_TRUE((*db)->LeaseTask(key, "w1", 1).ok());
      std::vector<store::TrialResult> results;
      for (uint32_t trial = 0; trial < 2; ++trial) {
        results.push_back(
            {key.job, key.sample, key.layer, trial, 0.25 * (key.layer + 1) + 0.125 * trial});
      }
      ASSERT_TRUE((*db)->CompleteTask(key, results).ok());
      ++completed;
    }
    EXPECT_EQ(completed, 1) << "one task was done through the service, one is left";
    EXPECT_EQ((*db)->GetJob(*id)->state, store::JobState::kRunning);
  }

  StartServer();  // no worker registers with it
  v1::Job job = AwaitState(job_id, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.profile_version(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // five more timer ticks
  EXPECT_EQ(ProfileCount(calibration_.get()), 1u);
}

class RetentionServiceTest : public ServiceFixture {
 protected:
  void Configure(SchedulerServerOptions& options) override {
    options.retention_ms = 1;
    options.retention_interval_ms = 50;
  }
};

TEST_F(RetentionServiceTest, AFinishedJobsTasksAndResultsGoTheRecordAndProfileStay) {
  FakeWorker worker(workers_.get(), "w1", Register("w1", 2, 1));
  const std::string job_id = SubmitOne();
  worker.Heartbeat(1);
  RunTasks(worker, 2);
  ASSERT_EQ(AwaitState(job_id, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(worker.End().ok());
  StatusOr<store::JobId> id = ParseJobId(job_id, "job_id");
  ASSERT_TRUE(id.ok());
  // Bounded wait for the retention thread (every 50 ms): look into the database between runs.
  bool purged = false;
  for (int i = 0; i < 20 && !purged; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    StopServer();
    {
      StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(options_.db_path);
      ASSERT_TRUE(db.ok()) << db.status();
      purged = (*db)->GetJobMeta(*id)->purged_at_ms != 0;
      if (purged) {
        EXPECT_TRUE(absl::IsFailedPrecondition((*db)->ListResults(*id).status()));
      }
    }
    StartServer();
  }
  ASSERT_TRUE(purged) << "the retention thread never purged the job";
  v1::Job job;
  ASSERT_TRUE(GetJob(job_id, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ProfileCount(calibration_.get()), 1u);
}

}  // namespace
}  // namespace ripplekv::scheduler::service
