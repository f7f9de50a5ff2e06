#pragma once
// What the scheduler service's gRPC tests share: a real SchedulerServer on loopback over a fresh
// RocksDB directory (ServiceFixture, options adjustable per suite), stubs of both services, and a
// FakeWorker that speaks the worker protocol on a real Connect stream message by message.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ripplekv/v1/calibration.grpc.pb.h"
#include "ripplekv/v1/worker.grpc.pb.h"
#include "scheduler/service/scheduler_server.h"
#include "tests/common/temp_dir.h"
#include "tests/proto/worker_messages.h"

namespace ripplekv::scheduler::service {

inline constexpr auto kCallTimeout = std::chrono::seconds(10);
inline constexpr auto kStreamTimeout = std::chrono::seconds(30);
inline const std::string kHash(64, 'a');

using ripplekv::testing::TempDir;

inline void SetDeadline(grpc::ClientContext* context, std::chrono::seconds timeout = kCallTimeout) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

inline v1::ModelInfo Model(int32_t n_layers) {
  v1::ModelInfo model;
  model.set_model_hash(kHash);
  model.set_architecture("llama");
  model.set_name("test-model");
  model.set_n_layers(n_layers);
  model.set_n_kv_heads(3);
  model.set_head_dim(64);
  model.set_d_model(576);
  model.set_vocab_size(49152);
  return model;
}

inline v1::SubmitJobRequest OneSampleJob() {
  v1::SubmitJobRequest request;
  request.mutable_spec()->mutable_model()->set_model_hash(kHash);
  v1::CalibrationParams* params = request.mutable_spec()->mutable_params();
  params->set_alpha(0.5f);
  params->set_trials(2);
  params->set_samples(1);
  params->set_context_len(16);
  params->set_probe_len(4);
  return request;
}

using ::ripplekv::worker_messages::TaskDoneMessage;
using ::ripplekv::worker_messages::TaskDoneWithResults;
using ::ripplekv::worker_messages::TrialResultMessage;

class FakeWorker {
 public:
  FakeWorker(v1::WorkerService::Stub* stub, const std::string& worker_id,
             const std::string& session_id)
      : worker_id_(worker_id) {
    SetDeadline(&context_, kStreamTimeout);
    stream_ = stub->Connect(&context_);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(worker_id);
    hello.mutable_hello()->set_session_id(session_id);
    EXPECT_TRUE(stream_->Write(hello));
  }

  bool Send(const v1::WorkerMessage& message) { return stream_->Write(message); }

  void Heartbeat(uint64_t sequence) {
    v1::WorkerMessage message;
    message.mutable_heartbeat()->set_sequence(sequence);
    EXPECT_TRUE(Send(message));
  }

  // Reads until `count` task assignments arrived (other messages are kept in `others`).
  std::vector<v1::TaskAssignment> ReadAssignments(size_t count) {
    std::vector<v1::TaskAssignment> out;
    v1::SchedulerMessage message;
    while (out.size() < count && stream_->Read(&message)) {
      if (message.has_task_assignment()) {
        out.push_back(message.task_assignment());
      } else {
        others.push_back(message);
      }
    }
    return out;
  }

  bool Read(v1::SchedulerMessage* message) { return stream_->Read(message); }

  // Ends the stream abruptly, as a killed worker's connection would.
  void Crash() {
    context_.TryCancel();
    (void)stream_->Finish();
  }

  grpc::Status End() {
    stream_->WritesDone();
    v1::SchedulerMessage drain;
    while (stream_->Read(&drain)) {
    }
    return stream_->Finish();
  }

  std::vector<v1::SchedulerMessage> others;

 private:
  std::string worker_id_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::SchedulerMessage>> stream_;
};

class ServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.db_path = dir_.path() + "/db";
    options_.sync_writes = false;
    options_.watch_poll_ms = 50;
    options_.expire_interval_ms = 100;
    // Jobs verify nothing unless a test asks (spec.verify): verification has tests of its own.
    options_.faults.default_verify_fraction = 0;
    Configure(options_);
    StartServer();
  }

  // Starts a server over the test's database (again after StopServer) and connects the stubs.
  void StartServer() {
    StatusOr<std::unique_ptr<SchedulerServer>> server = SchedulerServer::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                       grpc::InsecureChannelCredentials());
    calibration_ = v1::CalibrationService::NewStub(channel);
    workers_ = v1::WorkerService::NewStub(channel);
  }

  // Shuts the server down and closes its database (the test may open it directly).
  void StopServer() {
    server_->Shutdown();
    server_.reset();
  }
  // Test suites adjust the server's options here.
  virtual void Configure(SchedulerServerOptions& /*options*/) {}

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Registers a worker of a `n_layers`-layer model; returns its session id.
  std::string Register(const std::string& worker_id, int32_t n_layers = 2, int32_t capacity = 2,
                       const std::string& version = "") {
    v1::RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_version(version);
    *request.mutable_model() = Model(n_layers);
    request.set_capacity(capacity);
    v1::RegisterResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    const grpc::Status status = workers_->Register(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.session_id();
  }

  grpc::Status Submit(const v1::SubmitJobRequest& request, v1::SubmitJobResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return calibration_->SubmitJob(&context, request, response);
  }

  // Submits OneSampleJob(); returns its id.
  std::string SubmitOne() {
    v1::SubmitJobResponse submitted;
    EXPECT_TRUE(Submit(OneSampleJob(), &submitted).ok());
    return submitted.job().job_id();
  }

  // Polls the job until it is in `state`, for at most 15 s (the timer runs every 100 ms).
  v1::Job AwaitState(const std::string& job_id, v1::JobState state) {
    v1::Job job;
    for (int i = 0; i < 300; ++i) {
      EXPECT_TRUE(GetJob(job_id, &job).ok());
      if (job.state() == state) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return job;
  }

  grpc::Status GetJob(const std::string& id, v1::Job* job) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    SetDeadline(&context);
    return calibration_->GetJob(&context, request, job);
  }

  // The job once it is in `state`, or as it is after 10 s (a test failure if GetJob fails).
  v1::Job WaitForState(const std::string& id, v1::JobState state) {
    v1::Job job;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      const grpc::Status status = GetJob(id, &job);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok() || job.state() == state) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < give_up);
    return job;
  }

  grpc::Status Cancel(const std::string& id, v1::Job* job) {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    SetDeadline(&context);
    return calibration_->CancelJob(&context, request, job);
  }

  grpc::Status GetProfile(const std::string& hash, v1::Profile* profile) {
    v1::GetProfileRequest request;
    request.set_model_hash(hash);
    grpc::ClientContext context;
    SetDeadline(&context);
    return calibration_->GetProfile(&context, request, profile);
  }

  TempDir dir_;
  SchedulerServerOptions options_;
  std::unique_ptr<SchedulerServer> server_;
  std::unique_ptr<v1::CalibrationService::Stub> calibration_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

// A fake worker on a real Connect stream.
}  // namespace ripplekv::scheduler::service
