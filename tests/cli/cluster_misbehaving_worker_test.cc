// One misbehaving worker beside a genuine one, against real processes on loopback (a real
// ripplekv-scheduler and ripplekv-worker; the misbehaving worker speaks worker.proto from this
// test). It reproduces the four ways one such worker used to break the service:
//   1. it registers first with a model summary that differs only in its name, which used to lock
//      every genuine worker of the hash out;
//   2. it reports KL = NaN and task_done for a task it holds, then keeps heartbeating;
//   3. it reports KL = 1000 for every (sample, layer) of the job, and task_done, under task ids it
//      was never leased;
//   4. it sends task_done with INVALID_ARGUMENT for a task it does not hold.
// Required: genuine workers register, the job completes, its profile equals local `ripplekv
// calibrate` bit for bit, and the misbehaving worker is told why each time (docs/SCHEDULER.md,
// "The recorded model summary"; docs/DESIGN.md §3.3). Needs RIPPLEKV_SMOLLM2_GGUF.

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
using ::ripplekv::worker_messages::TaskDoneWithResults;
using ::ripplekv::worker_messages::TrialResultMessage;

const std::vector<std::string> kParams = {
    "--samples", "2", "--context-len", "64", "--probe", "8",  "--layers", "0,7,29",
    "--trials",  "1", "--seed",        "5",  "--alpha", "0.5"};

pb::TaskAssignment MadeUpTask(const std::string& job_id, int32_t sample, int32_t layer) {
  pb::TaskAssignment task;
  task.set_task_id("made-up-" + std::to_string(sample) + "-" + std::to_string(layer));
  task.set_job_id(job_id);
  task.set_sample(sample);
  task.set_layer(layer);
  return task;
}

TEST(ClusterMisbehavingWorkerTest, NoneOfTheFourMisbehavioursStopsTheJobOrChangesItsProfile) {
  const std::string model = TestModelPath();
  if (model.empty()) {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
  }
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const nlohmann::json local = LocalCalibrateJson(tmp.path(), model, kParams);
  ASSERT_FALSE(local.is_null());
  const pb::ModelInfo genuine = ModelOf(local["model"]);
  const std::string genuine_name = genuine.name();
  pb::ModelInfo mislabelled = genuine;
  mislabelled.set_name("x");
  LocalCluster cluster(tmp.path());
  cluster.StartScheduler();
  ASSERT_TRUE(cluster.SchedulerAnswers(std::chrono::seconds(10))) << cluster.Logs();

  // 1. The mislabelled worker registers first; a worker with the genuine summary still registers.
  FakeWorker vm(cluster.address(), "vm");
  grpc::Status registered = vm.Register(mislabelled);
  ASSERT_TRUE(registered.ok()) << registered.error_message();
  ASSERT_TRUE(vm.Connect());
  FakeWorker liar(cluster.address(), "liar");  // the genuine summary; lies about results later
  registered = liar.Register(genuine);
  ASSERT_TRUE(registered.ok()) << "locked out by the first registration: "
                               << registered.error_message();
  ASSERT_TRUE(liar.Connect());

  // The job's ModelRef (name, layer count from the model file) records the genuine summary.
  std::vector<std::string> submit = {"submit", "--scheduler", cluster.address(), "--model", model};
  submit.insert(submit.end(), kParams.begin(), kParams.end());
  const CliResult submitted = RunCli(tmp.path(), "submit", submit, std::chrono::seconds(60));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err << cluster.Logs();
  std::string job_id = submitted.out;
  while (!job_id.empty() && (job_id.back() == '\n' || job_id.back() == ' ')) job_id.pop_back();
  const std::string differs = "name: \"x\" (recorded \"" + genuine_name + "\")";
  const grpc::Status dropped = vm.Ended();
  EXPECT_EQ(dropped.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(dropped.error_message().find(differs), std::string::npos) << dropped.error_message();
  FakeWorker again(cluster.address(), "vm");
  const grpc::Status refused = again.Register(mislabelled);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find(differs), std::string::npos) << refused.error_message();

  // 2. NaN for a task it holds, task_done, and it keeps heartbeating.
  ASSERT_TRUE(liar.Heartbeat());
  auto leased = liar.Await([](const pb::SchedulerMessage& m) { return m.has_task_assignment(); });
  ASSERT_TRUE(leased) << cluster.Logs();
  const pb::TaskAssignment task = leased->task_assignment();
  ASSERT_TRUE(liar.Send(TrialResultMessage(task, 0, std::numeric_limits<double>::quiet_NaN())));
  const std::string nan_reason = liar.CancellationOf(task.task_id());
  EXPECT_NE(nan_reason.find("invalid result"), std::string::npos) << nan_reason;
  ASSERT_TRUE(liar.Send(TaskDoneMessage(task)));
  const std::string done_reason = liar.CancellationOf(task.task_id());
  EXPECT_NE(done_reason.find("which this stream does not hold"), std::string::npos) << done_reason;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(liar.Heartbeat());
    ASSERT_TRUE(liar.Await([](const pb::SchedulerMessage& m) { return m.has_heartbeat_ack(); }));
  }

  // 3. KL = 1000 for every (sample, layer) of the job, and task_done, under made-up task ids.
  for (int32_t sample : {0, 1}) {
    for (int32_t layer : {0, 7, 29}) {
      const pb::TaskAssignment forged = MadeUpTask(job_id, sample, layer);
      ASSERT_TRUE(liar.Send(TrialResultMessage(forged, 0, 1000.0)));
      std::string reason = liar.CancellationOf(forged.task_id());
      EXPECT_NE(reason.find("trial_result for task \"" + forged.task_id() +
                            "\", which this stream does not hold"),
                std::string::npos)
          << reason;
      ASSERT_TRUE(liar.Send(TaskDoneWithResults(forged, {1000.0})));
      reason = liar.CancellationOf(forged.task_id());
      EXPECT_NE(reason.find("task_done for task \"" + forged.task_id() +
                            "\", which this stream does not hold"),
                std::string::npos)
          << reason;
    }
  }

  // 4. task_done with INVALID_ARGUMENT for a task it does not hold.
  pb::WorkerMessage failure = TaskDoneMessage(MadeUpTask(job_id, 1, 29));
  failure.mutable_task_done()->mutable_error()->set_code(
      static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT));
  failure.mutable_task_done()->mutable_error()->set_message("forged");
  ASSERT_TRUE(liar.Send(failure));
  const std::string failure_reason = liar.CancellationOf("made-up-1-29");
  EXPECT_NE(failure_reason.find("which this stream does not hold"), std::string::npos)
      << failure_reason;
  const grpc::Status left = liar.Leave();  // any lease it holds returns to pending
  EXPECT_TRUE(left.ok()) << left.error_message();

  // The genuine worker registers after all of it and runs the job to the end.
  cluster.StartWorker("genuine-worker", model);
  ASSERT_TRUE(cluster.Registered("genuine-worker", std::chrono::seconds(40))) << cluster.Logs();
  const CliResult watched =
      RunCli(tmp.path(), "watch", {"watch", "--scheduler", cluster.address(), job_id},
             std::chrono::seconds(120));
  EXPECT_EQ(watched.exit_code, 0) << watched.out << watched.err << cluster.Logs();
  const nlohmann::json remote =
      FetchProfileJson(tmp.path(), cluster.address(), local["model"]["hash"].get<std::string>());
  ASSERT_FALSE(remote.is_null()) << cluster.Logs();
  ExpectSameProfile(remote, local, /*layers=*/3);
  cluster.StopAll();
}

}  // namespace
}  // namespace ripplekv::testing
