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
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "tests/cli/cluster_expect.h"
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

// The lying worker: registered with the model's true summary, one Connect stream.
class Liar {
 public:
  Liar(const std::string& address, const nlohmann::json& model)
      : stub_(pb::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    pb::RegisterRequest request;
    request.set_worker_id("liar");
    request.set_capacity(1);
    pb::ModelInfo* m = request.mutable_model();
    m->set_model_hash(model["hash"].get<std::string>());
    m->set_architecture(model["architecture"].get<std::string>());
    m->set_name(model["name"].get<std::string>());
    m->set_n_layers(model["n_layers"].get<int32_t>());
    m->set_n_kv_heads(model["n_kv_heads"].get<int32_t>());
    m->set_head_dim(model["head_dim"].get<int32_t>());
    m->set_d_model(model["d_model"].get<int32_t>());
    m->set_vocab_size(model["vocab_size"].get<int32_t>());
    pb::RegisterResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = stub_->Register(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Connect(&context_);
    pb::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id("liar");
    hello.mutable_hello()->set_session_id(response.session_id());
    EXPECT_TRUE(stream_->Write(hello));
  }

  bool Send(const pb::WorkerMessage& message) { return stream_->Write(message); }

  // Heartbeats until the next assignment arrives; false when the stream ended.
  bool NextTask(pb::TaskAssignment* task) {
    pb::WorkerMessage beat;
    beat.mutable_heartbeat()->set_sequence(++sequence_);
    if (!stream_->Write(beat)) return false;
    pb::SchedulerMessage message;
    while (stream_->Read(&message)) {
      if (message.has_task_assignment()) {
        *task = message.task_assignment();
        return true;
      }
      if (message.has_heartbeat_ack()) {  // nothing yet: ask again shortly
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        beat.mutable_heartbeat()->set_sequence(++sequence_);
        if (!stream_->Write(beat)) return false;
      }
    }
    return false;
  }

  // Disappears without a word, as a killed process would.
  void Vanish() {
    context_.TryCancel();
    (void)stream_->Finish();
  }

 private:
  std::unique_ptr<pb::WorkerService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WorkerMessage, pb::SchedulerMessage>> stream_;
  uint64_t sequence_ = 0;
};

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

  Liar liar(cluster.address(), local["model"]);
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
