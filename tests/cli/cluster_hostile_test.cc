// A lying worker next to an honest one, against real processes on loopback: a real
// ripplekv-scheduler, a real ripplekv-worker, and a worker that speaks the protocol from this test
// with the model's real summary. It sends a NaN KL, a forged task_done that would fail the job, a
// task_done with a trial missing, and then vanishes holding a lease: three failed attempts of one
// task (the scheduler's limit is four) and one rejected message. Every lie is rejected and its
// task leased again; the job succeeds and its profile equals local `ripplekv calibrate` bit for
// bit (docs/DESIGN.md §3.3; other bad values: hostile_worker_test). Needs RIPPLEKV_SMOLLM2_GGUF.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "tests/cli/cluster_expect.h"
#include "tests/cli/fake_worker.h"
#include "tests/cli/process_harness.h"
#include "tests/proto/worker_messages.h"

namespace ripplekv::testing {
namespace {

namespace pb = ::ripplekv::v1;
using ::ripplekv::worker_messages::TaskDoneMessage;
using ::ripplekv::worker_messages::TrialResultMessage;

const std::vector<std::string> kParams = {
    "--samples", "2", "--context-len", "64", "--probe", "8",  "--layers", "0,7,29",
    "--trials",  "2", "--seed",        "5",  "--alpha", "0.5"};

// A task_done for a task id alone (the liar's forgery names a task it was never given).
pb::WorkerMessage Done(const std::string& task_id) {
  pb::TaskAssignment task;
  task.set_task_id(task_id);
  return TaskDoneMessage(task);
}

TEST(ClusterHostileTest, ALyingWorkerLeavesTheProfileEqualToLocalCalibrate) {
  const std::string model = TestModelPath();
  if (model.empty()) {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
  }
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const nlohmann::json local = LocalCalibrateJson(tmp.path(), model, kParams);
  ASSERT_FALSE(local.is_null());
  LocalCluster cluster(tmp.path());
  cluster.StartScheduler();
  ASSERT_TRUE(cluster.SchedulerAnswers(std::chrono::seconds(10))) << cluster.Logs();

  // The lying worker: registered with the model's true summary, one Connect stream.
  FakeWorker liar(cluster.address(), "liar");
  const grpc::Status registered = liar.Register(ModelOf(local["model"]));
  ASSERT_TRUE(registered.ok()) << registered.error_message();
  ASSERT_TRUE(liar.Connect());
  std::vector<std::string> submit = {"submit", "--scheduler", cluster.address(), "--model", model};
  submit.insert(submit.end(), kParams.begin(), kParams.end());
  const CliResult submitted = RunCli(tmp.path(), "submit", submit, std::chrono::seconds(60));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err << cluster.Logs();
  std::string job_id = submitted.out;
  while (!job_id.empty() && (job_id.back() == '\n' || job_id.back() == ' ')) job_id.pop_back();

  // Lie 1: a NaN KL. Lie 2: a forged task_done that would fail the job, for a task it does not
  // hold. Lie 3: task_done with trial 1 missing. Then it vanishes holding the task again.
  pb::TaskAssignment task;
  ASSERT_TRUE(liar.NextTask(&task));
  ASSERT_TRUE(liar.Send(TrialResultMessage(task, 0, std::numeric_limits<double>::quiet_NaN())));
  pb::WorkerMessage forged = Done(job_id + "-1-29-9");
  forged.mutable_task_done()->mutable_error()->set_code(
      static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT));
  forged.mutable_task_done()->mutable_error()->set_message("forged");
  ASSERT_TRUE(liar.Send(forged));
  ASSERT_TRUE(liar.NextTask(&task));
  ASSERT_TRUE(liar.Send(TrialResultMessage(task, 0, 0.5)));
  ASSERT_TRUE(liar.Send(TaskDoneMessage(task)));
  ASSERT_TRUE(liar.NextTask(&task));
  liar.Vanish();  // holding a lease: a failed attempt, the task goes to the honest worker

  cluster.StartWorker("honest", model);
  ASSERT_TRUE(cluster.Registered("honest", std::chrono::seconds(40))) << cluster.Logs();
  const CliResult watched =
      RunCli(tmp.path(), "watch", {"watch", "--scheduler", cluster.address(), job_id},
             std::chrono::seconds(120));
  EXPECT_EQ(watched.exit_code, 0) << watched.out << watched.err << cluster.Logs();

  const nlohmann::json remote =
      FetchProfileJson(tmp.path(), cluster.address(), local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster.Logs();
  ExpectSameProfile(remote, local, /*layers=*/3);
  const std::string logs = cluster.Logs();
  EXPECT_NE(logs.find("rejected message"), std::string::npos) << "the forged task_done";
  EXPECT_NE(logs.find("sent an invalid result"), std::string::npos) << logs;
  cluster.StopAll();
}

}  // namespace
}  // namespace ripplekv::testing
