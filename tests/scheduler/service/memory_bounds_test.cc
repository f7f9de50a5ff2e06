// What the scheduler holds for its callers stays bounded under abuse (docs/OPERATIONS.md,
// "Memory"), on a real server on loopback:
//   * WatchBudgets streams opened and cancelled, for models the store does not know (NOT_FOUND)
//     and for one it knows, leave no entry in the rollout engine once they have ended;
//   * inline data of pending jobs past --max-pending-inline-mib is RESOURCE_EXHAUSTED saying
//     what is pending and the cap, and nothing is stored.
// bench/scheduler_soak.py measures the resident memory of the same abuse over time.

#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "ripplekv/v1/rollout.grpc.pb.h"
#include "store/store.h"
#include "tests/scheduler/service/service_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

class MemoryBoundsTest : public ServiceFixture {
 protected:
  void Configure(SchedulerServerOptions& options) override {
    options.max_pending_inline_bytes = 3ull << 20;
  }

  std::unique_ptr<v1::RolloutService::Stub> Rollouts() {
    return v1::RolloutService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  // Opens a WatchBudgets stream, reads its first message (the assignment, or the end), cancels
  // it and returns how it ended (OK when it delivered an assignment).
  static grpc::Status WatchOnce(v1::RolloutService::Stub& stub, const std::string& node,
                                const std::string& hash) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::WatchBudgetsRequest request;
    request.set_node_id(node);
    request.set_model_hash(hash);
    auto reader = stub.WatchBudgets(&context, request);
    v1::BudgetAssignment assignment;
    const bool opened = reader->Read(&assignment);
    if (opened) context.TryCancel();
    while (reader->Read(&assignment)) {
    }
    const grpc::Status status = reader->Finish();
    return opened ? grpc::Status::OK : status;
  }

  // Waits (bounded) for the engine to have seen every stream end: OnDone runs after the client
  // has its status.
  void AwaitTracked(size_t nodes, size_t models) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    rollout::RolloutEngine& engine = server_->rollout_engine();
    while ((engine.tracked_nodes() != nodes || engine.tracked_models() != models) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(engine.tracked_nodes(), nodes);
    EXPECT_EQ(engine.tracked_models(), models);
  }

  static v1::SubmitJobRequest InlineJob(size_t bytes) {
    v1::SubmitJobRequest request = OneSampleJob();
    request.mutable_spec()->mutable_model()->set_n_layers(2);
    request.mutable_spec()->mutable_data()->set_text(std::string(bytes, 'x'));
    return request;
  }
};

TEST_F(MemoryBoundsTest, WatchStreamsOpenedAndCancelledLeaveNothingInTheEngine) {
  // A model the store knows: a profile, as a finished calibration leaves.
  StopServer();
  {
    StatusOr<std::unique_ptr<store::Store>> st = store::OpenStore(options_.db_path);
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_TRUE((*st)->PutProfileVersion(kHash, R"({"profile": 1})").ok());
  }
  StartServer();
  auto stub = Rollouts();
  AwaitTracked(0, 0);
  std::mt19937_64 rng(31);
  int not_found = 0, delivered = 0;
  for (int i = 0; i < 300; ++i) {
    std::string hash(64, '0');
    for (char& c : hash) c = "0123456789abcdef"[rng() % 16];
    const grpc::Status unknown = WatchOnce(*stub, "node-" + std::to_string(i % 7), hash);
    if (unknown.error_code() == grpc::StatusCode::NOT_FOUND &&
        unknown.error_message().find(hash) != std::string::npos) {
      ++not_found;
    }
    if (WatchOnce(*stub, "node-" + std::to_string(i), kHash).ok()) ++delivered;
  }
  EXPECT_EQ(not_found, 300);
  EXPECT_EQ(delivered, 300);
  AwaitTracked(0, 0);
  // A stream still open is tracked, and goes with its end.
  grpc::ClientContext context;
  v1::WatchBudgetsRequest request;
  request.set_node_id("held");
  request.set_model_hash(kHash);
  auto reader = stub->WatchBudgets(&context, request);
  v1::BudgetAssignment assignment;
  ASSERT_TRUE(reader->Read(&assignment));
  AwaitTracked(1, 1);
  context.TryCancel();
  while (reader->Read(&assignment)) {
  }
  (void)reader->Finish();
  AwaitTracked(0, 0);
}

TEST_F(MemoryBoundsTest, InlineDataOfPendingJobsPastTheCapIsResourceExhausted) {
  v1::SubmitJobResponse response;
  for (int i = 0; i < 3; ++i) {
    const grpc::Status s = Submit(InlineJob(1ull << 20), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const grpc::Status refused = Submit(InlineJob(1), &response);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  for (const char* part : {"pending jobs hold 3.0 MiB", "cap of 3.0 MiB",
                           "--max-pending-inline-mib"}) {
    EXPECT_NE(refused.error_message().find(part), std::string::npos) << refused.error_message();
  }
  // Jobs without inline data are not capped.
  v1::SubmitJobRequest with_layers = OneSampleJob();
  with_layers.mutable_spec()->mutable_model()->set_n_layers(2);
  EXPECT_TRUE(Submit(with_layers, &response).ok());
}

}  // namespace
}  // namespace ripplekv::scheduler::service
