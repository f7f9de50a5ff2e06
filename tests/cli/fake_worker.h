#pragma once
// A worker that speaks worker.proto from a test (Register, then one Connect stream), for tests that
// put a misbehaving worker beside real ripplekv processes: it sends what the test tells it to and
// reads what the scheduler answers.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "nlohmann/json.hpp"
#include "ripplekv/v1/worker.grpc.pb.h"

namespace ripplekv::testing {

namespace pb = ::ripplekv::v1;

// The ModelInfo of a profile's "model" block (the summary `ripplekv calibrate` recorded).
inline pb::ModelInfo ModelOf(const nlohmann::json& model) {
  pb::ModelInfo m;
  m.set_model_hash(model["hash"].get<std::string>());
  m.set_architecture(model["architecture"].get<std::string>());
  m.set_name(model["name"].get<std::string>());
  m.set_n_layers(model["n_layers"].get<int32_t>());
  m.set_n_kv_heads(model["n_kv_heads"].get<int32_t>());
  m.set_head_dim(model["head_dim"].get<int32_t>());
  m.set_d_model(model["d_model"].get<int32_t>());
  m.set_vocab_size(model["vocab_size"].get<int32_t>());
  return m;
}

// A worker speaking the protocol from the test: Register, then one Connect stream.
class FakeWorker {
 public:
  FakeWorker(const std::string& address, std::string id)
      : id_(std::move(id)),
        stub_(pb::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  grpc::Status Register(const pb::ModelInfo& model) {
    pb::RegisterRequest request;
    request.set_worker_id(id_);
    request.set_capacity(1);
    *request.mutable_model() = model;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Register(&context, request, &response_);
  }

  bool Connect() {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stream_ = stub_->Connect(&context_);
    pb::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(id_);
    hello.mutable_hello()->set_session_id(response_.session_id());
    return stream_->Write(hello);
  }

  bool Send(const pb::WorkerMessage& message) { return stream_->Write(message); }

  // Heartbeats until the next assignment arrives; false when the stream ended.
  bool NextTask(pb::TaskAssignment* task) {
    if (!Heartbeat()) return false;
    auto m = Await([](const pb::SchedulerMessage& m) { return m.has_task_assignment(); });
    if (m) *task = m->task_assignment();
    return m.has_value();
  }

  bool Heartbeat() {
    pb::WorkerMessage beat;
    beat.mutable_heartbeat()->set_sequence(++sequence_);
    return stream_->Write(beat);
  }

  // Reads until a message satisfies `pred` (heartbeating on every ack); nullopt when the stream
  // ended first.
  template <typename Pred>
  std::optional<pb::SchedulerMessage> Await(Pred pred) {
    pb::SchedulerMessage message;
    while (stream_->Read(&message)) {
      if (pred(message)) return message;
      if (message.has_heartbeat_ack()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!Heartbeat()) return std::nullopt;
      }
    }
    return std::nullopt;
  }

  // The cancellation of task `task_id`, with its reason; empty when the stream ended first.
  std::string CancellationOf(const std::string& task_id) {
    auto m = Await([&](const pb::SchedulerMessage& m) {
      return m.has_task_cancellation() && m.task_cancellation().task_id() == task_id;
    });
    return m ? m->task_cancellation().reason() : std::string();
  }

  // Heartbeats until the stream ends; its status.
  grpc::Status Ended() {
    (void)Heartbeat();
    while (Await([](const pb::SchedulerMessage&) { return false; })) {
    }
    return stream_->Finish();
  }

  // Disappears without a word, as a killed process would.
  void Vanish() {
    context_.TryCancel();
    (void)stream_->Finish();
  }

  // Closes its stream as a worker leaving would; its leases return to pending.
  grpc::Status Leave() {
    stream_->WritesDone();
    pb::SchedulerMessage message;
    while (stream_->Read(&message)) {
    }
    return stream_->Finish();
  }

 private:
  const std::string id_;
  std::unique_ptr<pb::WorkerService::Stub> stub_;
  pb::RegisterResponse response_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WorkerMessage, pb::SchedulerMessage>> stream_;
  uint64_t sequence_ = 0;
};

}  // namespace ripplekv::testing
