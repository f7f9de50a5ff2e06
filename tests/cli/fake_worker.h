#pragma once
// A worker that speaks worker.proto from a test (Register, then one Connect stream), for tests that
// put a misbehaving worker beside real ripplekv processes: it sends what the test tells it to and
// reads what the scheduler answers, step by step from the test's thread or on a thread of its own
// (ServeInBackground) while real workers run beside it.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// What a FakeWorker registers as, beyond its id and model (RegisterRequest).
struct FakeRegistration {
  uint32_t capacity = 1;  // tasks it may hold at once
  std::string numerics;   // RegisterRequest.numerics; empty: unknown
};

// What a fake worker does with a task assignment (ServeInBackground): the messages it answers
// with, which end its hold of the task (an empty list drops the task without a word); nullopt: it
// keeps the task for now and is asked again after each heartbeat ack.
using FakeAnswer =
    std::function<std::optional<std::vector<pb::WorkerMessage>>(const pb::TaskAssignment&)>;

// What a served stream saw, once it ended (FakeWorker::Join).
struct FakeServed {
  std::vector<pb::TaskAssignment> assigned;  // every assignment, in order
  std::optional<pb::Quarantined> quarantined;
  bool after_quarantined = false;  // a message arrived after `quarantined`
  grpc::Status status;             // how the stream ended
};

// A worker speaking the protocol from the test: Register, then one Connect stream. Not
// thread-safe, except the observers (assignments(), quarantined(), ended()) and Stop(), which the
// test's thread may call while ServeInBackground's thread runs the stream.
class FakeWorker {
 public:
  FakeWorker(const std::string& address, std::string id)
      : id_(std::move(id)),
        stub_(pb::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}
  FakeWorker(const FakeWorker&) = delete;
  FakeWorker& operator=(const FakeWorker&) = delete;
  // Ends a background stream (as a killed process would) and joins its thread.
  ~FakeWorker() {
    if (serving_.joinable()) {
      Stop();
      serving_.join();
    }
  }

  const std::string& id() const { return id_; }

  grpc::Status Register(const pb::ModelInfo& model, const FakeRegistration& how = {}) {
    pb::RegisterRequest request;
    request.set_worker_id(id_);
    request.set_capacity(how.capacity);
    request.set_numerics(how.numerics);
    *request.mutable_model() = model;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Register(&context, request, &response_);
  }

  // Opens the Connect stream, which ends by itself after `lifetime` at the latest.
  bool Connect(std::chrono::seconds lifetime = std::chrono::seconds(120)) {
    context_.set_deadline(std::chrono::system_clock::now() + lifetime);
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

  // A heartbeat listing `task_ids` as held (their leases are renewed; others are not).
  bool Heartbeat(const std::vector<std::string>& task_ids = {}) {
    pb::WorkerMessage beat;
    beat.mutable_heartbeat()->set_sequence(++sequence_);
    beat.mutable_heartbeat()->set_active_tasks(static_cast<int32_t>(task_ids.size()));
    for (const std::string& id : task_ids) beat.mutable_heartbeat()->add_task_ids(id);
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

  // Runs the connected stream on a thread of its own until it ends: accepts every assignment
  // (task_accepted) and answers it with `answer`, heartbeats on each ack (every 50 ms), listing
  // the tasks it keeps when `list_held` (so their leases are renewed up to the task deadline;
  // without it they expire as a hung worker's do), and drops a kept task the scheduler cancels.
  // Join() tells what it saw.
  void ServeInBackground(FakeAnswer answer, bool list_held) {
    serving_ = std::thread([this, answer = std::move(answer), list_held] {
      served_ = Serve(answer, list_held);
      ended_ = true;
    });
  }
  int assignments() const { return assignments_.load(); }
  bool quarantined() const { return quarantined_.load(); }
  bool ended() const { return ended_.load(); }
  // Ends the stream from the client's side (TryCancel), e.g. when a test gives up on it.
  void Stop() { context_.TryCancel(); }
  // Waits for ServeInBackground's stream to end (bounded by Connect's lifetime; Stop() first to
  // end it now) and returns what it saw.
  FakeServed Join() {
    if (serving_.joinable()) serving_.join();
    return served_;
  }

 private:
  FakeServed Serve(const FakeAnswer& answer, bool list_held) {
    FakeServed served;
    std::map<std::string, pb::TaskAssignment> kept;  // by task id
    // Answers the task (true) or keeps it; a failed write ends the stream soon enough.
    auto handle = [&](const pb::TaskAssignment& task) {
      std::optional<std::vector<pb::WorkerMessage>> messages = answer(task);
      if (!messages) return false;
      for (const pb::WorkerMessage& m : *messages) (void)stream_->Write(m);
      return true;
    };
    auto beat = [&] {
      std::vector<std::string> ids;
      if (list_held) {
        for (const auto& [id, task] : kept) ids.push_back(id);
      }
      return Heartbeat(ids);
    };
    if (beat()) {
      pb::SchedulerMessage message;
      while (stream_->Read(&message)) {
        if (served.quarantined) served.after_quarantined = true;
        if (message.has_task_assignment()) {
          const pb::TaskAssignment& task = message.task_assignment();
          served.assigned.push_back(task);
          ++assignments_;
          pb::WorkerMessage accepted;
          accepted.mutable_task_accepted()->set_task_id(task.task_id());
          (void)stream_->Write(accepted);
          if (!handle(task)) kept.emplace(task.task_id(), task);
        } else if (message.has_task_cancellation()) {
          const pb::TaskCancellation& c = message.task_cancellation();
          if (c.has_task_id()) {
            kept.erase(c.task_id());
          } else {
            std::erase_if(kept,
                          [&](const auto& entry) { return entry.second.job_id() == c.job_id(); });
          }
        } else if (message.has_quarantined()) {
          served.quarantined = message.quarantined();
          quarantined_ = true;
        } else if (message.has_heartbeat_ack()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          std::erase_if(kept, [&](const auto& entry) { return handle(entry.second); });
          (void)beat();  // a dead stream ends the reads too
        }
      }
    }
    served.status = stream_->Finish();
    return served;
  }

  const std::string id_;
  std::unique_ptr<pb::WorkerService::Stub> stub_;
  pb::RegisterResponse response_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WorkerMessage, pb::SchedulerMessage>> stream_;
  uint64_t sequence_ = 0;
  std::thread serving_;  // ServeInBackground's
  FakeServed served_;    // written by serving_ before it ends
  std::atomic<int> assignments_{0};
  std::atomic<bool> quarantined_{false};
  std::atomic<bool> ended_{false};
};

}  // namespace ripplekv::testing
