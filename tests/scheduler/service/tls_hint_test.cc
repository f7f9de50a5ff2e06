// A plaintext client of a TLS scheduler is told that TLS is the likely cause
// (proto/client_channel.h, kTlsHint): against a real SchedulerServer serving TLS on loopback
// (certificates from deploy/local/make-tls), a plaintext call fails UNAVAILABLE in a way TlsHintFor
// recognizes, a TLS call succeeds, a closed port gets no hint, and ripplekv-agent's reconnect log
// carries the hint.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "base/file_io.h"
#include "proto/client_channel.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "scheduler/service/scheduler_server.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"
#include "tests/common/temp_dir.h"
#include "tests/scheduler/service/tls_fixture.h"

namespace ripplekv::scheduler::service {
namespace {

using ripplekv::testing::TempDir;

// Log lines kept in memory; text() may be called while other threads log.
class MemorySink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    text_.append(msg.payload.data(), msg.payload.size());
    text_ += '\n';
  }
  void flush_() override {}

 private:
  std::string text_;
};

grpc::Status ListJobs(const std::string& address, const v1::ClientChannelOptions& options) {
  auto stub = v1::CalibrationService::NewStub(v1::MakeClientChannel(address, options));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListJobsResponse response;
  return stub->ListJobs(&context, v1::ListJobsRequest(), &response);
}

class TlsHintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTls(tmp_.File("tls"))) << kMakeTlsFailed;
    SchedulerServerOptions options;
    options.db_path = tmp_.File("db");
    options.sync_writes = false;
    options.security.tls_cert_file = tmp_.File("tls/server.pem");
    options.security.tls_key_file = tmp_.File("tls/server.key");
    StatusOr<std::unique_ptr<SchedulerServer>> server = SchedulerServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  TempDir tmp_;
  std::unique_ptr<SchedulerServer> server_;
  std::string address_;
};

TEST_F(TlsHintTest, APlaintextCallToTheTlsPortGetsTheHintAndOnlyIt) {
  v1::ClientChannelOptions tls;
  StatusOr<std::string> ca = ReadFileBounded(tmp_.File("tls/ca.pem"), 1 << 20);
  ASSERT_TRUE(ca.ok()) << ca.status();
  tls.tls_ca_pem = *ca;
  const grpc::Status over_tls = ListJobs(address_, tls);
  ASSERT_TRUE(over_tls.ok()) << over_tls.error_message();

  const grpc::Status plain = ListJobs(address_, {});
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  std::cout << "gRPC says: " << plain.error_message() << "\n";
  EXPECT_EQ(v1::TlsHintFor(plain.error_code(), plain.error_message(), /*plaintext=*/true),
            v1::kTlsHint)
      << plain.error_message();
  EXPECT_EQ(v1::TlsHintFor(plain.error_code(), plain.error_message(), /*plaintext=*/false), "");
  EXPECT_NE(v1::kTlsHint.find("--tls-ca"), std::string_view::npos);

  // Nothing listening: refused, not hung up on; no hint.
  server_->Shutdown();
  server_.reset();
  const grpc::Status closed = ListJobs(address_, {});
  EXPECT_EQ(closed.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(v1::TlsHintFor(closed.error_code(), closed.error_message(), true), "")
      << closed.error_message();
}

TEST_F(TlsHintTest, APlaintextAgentLogsTheHintWhenItsStreamFails) {
  auto sink = std::make_shared<MemorySink>();
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  agent::AgentOptions options{
      .node_id = "node-1", .model_hash = std::string(64, 'a'), .map_path = tmp_.File("map.json")};
  options.plaintext = true;
  v1::ClientChannelOptions channel_options;
  channel_options.keepalive_without_calls = true;
  StatusOr<std::unique_ptr<agent::Agent>> agent =
      agent::Agent::Create(options, v1::MakeClientChannel(address_, channel_options));
  ASSERT_TRUE(agent.ok()) << agent.status();
  std::thread run([&] { (void)(*agent)->Run(); });
  // The first failed stream is logged at once; give it a bounded while.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (sink->text().find("reconnecting") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (*agent)->Stop();
  run.join();
  spdlog::set_default_logger(previous);
  EXPECT_NE(sink->text().find(std::string(v1::kTlsHint)), std::string::npos) << sink->text();
}

}  // namespace
}  // namespace ripplekv::scheduler::service
