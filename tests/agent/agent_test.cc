// agent/agent.h: which step an assignment takes given what the node holds, and the agent against a
// fake in-process RolloutService: writes, reports, the held version stated on reconnect, hook
// failures, removal, render errors, refusals and Stop().

#include "agent/agent.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/map_file.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "method/budget_map.h"
#include "method/frozen_map.h"
#include "nlohmann/json.hpp"
#include "ripplekv/v1/rollout.grpc.pb.h"
#include "tests/common/per_head_map.h"

namespace ripplekv::agent {
namespace {

namespace pb = ::ripplekv::v1;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kModel(64, 'a');

TEST(NextStepTest, FollowsWhatIsHeldAndApplied) {
  EXPECT_EQ(NextStep("v1", "v1", /*applied=*/true, /*files_exist=*/true), AssignmentStep::kReport);
  EXPECT_EQ(NextStep("v1", "v1", /*applied=*/false, true), AssignmentStep::kWrite);
  EXPECT_EQ(NextStep("v2", "v1", true, true), AssignmentStep::kWrite);
  EXPECT_EQ(NextStep("v1", "", false, false), AssignmentStep::kWrite);
  EXPECT_EQ(NextStep("", "v1", true, true), AssignmentStep::kRemove);
  // A sidecar left by a removal whose hook failed: remove (and run the hook) again.
  EXPECT_EQ(NextStep("", "", false, /*files_exist=*/true), AssignmentStep::kRemove);
  EXPECT_EQ(NextStep("", "", false, false), AssignmentStep::kReport);
}

TEST(StatedVersionTest, OnlyAnAppliedVersionIsStated) {
  EXPECT_EQ(StatedVersion("v1", true), "v1");
  EXPECT_EQ(StatedVersion("v1", false), "");
  EXPECT_EQ(StatedVersion("", true), "");
}

TEST(ValidateAgentOptionsTest, RejectsWhatTheSchedulerWould) {
  AgentOptions ok{.node_id = "node-1.a:b_c", .model_hash = kModel, .map_path = "/tmp/m.json"};
  EXPECT_TRUE(ValidateAgentOptions(ok).ok());
  for (const std::string& id : {std::string(""), std::string("a b"), std::string(129, 'n')}) {
    AgentOptions bad = ok;
    bad.node_id = id;
    EXPECT_EQ(ValidateAgentOptions(bad).code(), absl::StatusCode::kInvalidArgument) << id;
  }
  AgentOptions no_path = ok;
  no_path.map_path.clear();
  EXPECT_EQ(ValidateAgentOptions(no_path).code(), absl::StatusCode::kInvalidArgument);
}

// A frozen map document of three layers and its version id (the first 16 hex digits of its
// SHA-256), `max_context` set or not.
struct Version {
  std::string id;
  std::string document;
  method::FrozenMap frozen;
};

Version MakeVersion(int64_t average_tokens, std::optional<int64_t> max_context = 4096) {
  method::BudgetOptions options{.average_tokens = average_tokens, .max_context = max_context};
  StatusOr<method::BudgetMap> map = method::ComputeBudgetMap(std::vector<double>{1, 2, 3}, options);
  EXPECT_TRUE(map.ok()) << map.status();
  map->model_hash = kModel;
  Version v;
  v.frozen = {.profile_version = 1, .selection = {.method = "snapkv"}, .map = *map};
  StatusOr<std::string> document = method::FrozenMapToJson(v.frozen);
  EXPECT_TRUE(document.ok()) << document.status();
  v.document = *document;
  v.id = Sha256Hex(v.document).substr(0, 16);
  return v;
}

// A per-head response map (native schema version 2) of three layers of two KV heads, frozen.
Version MakePerHeadVersion() {
  const method::BudgetMap map = testing::PerHeadExampleMap(kModel, /*max_context=*/4096);
  Version v;
  v.frozen = {.profile_version = 1, .selection = {.method = "adakv"}, .map = map};
  StatusOr<std::string> document = method::FrozenMapToJson(v.frozen);
  EXPECT_TRUE(document.ok()) << document.status();
  v.document = *document;
  v.id = Sha256Hex(v.document).substr(0, 16);
  return v;
}

pb::BudgetAssignment Assign(const Version& v, const std::string& rollout_id) {
  pb::BudgetAssignment a;
  a.set_model_hash(kModel);
  a.set_version(v.id);
  a.set_rollout_id(rollout_id);
  a.mutable_map()->set_model_hash(kModel);
  a.mutable_map()->set_version(v.id);
  a.mutable_map()->set_document(v.document);
  return a;
}

pb::BudgetAssignment Unassign(const std::string& rollout_id) {
  pb::BudgetAssignment a;
  a.set_model_hash(kModel);
  a.set_rollout_id(rollout_id);
  return a;
}

// Serves scripted WatchBudgets streams (one script per call, in order; once they run out, a call
// stays open until cancelled) and records every request and report.
class FakeRollouts final : public pb::RolloutService::Service {
 public:
  struct Stream {
    std::vector<pb::BudgetAssignment> send;
    // How the stream ends after sending; OK here means: stay open until cancelled.
    grpc::Status end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "server restarting");
  };

  void Script(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    scripts_.push_back(std::move(s));
  }
  // The next `n` reports fail with `code`.
  void FailReports(int n, grpc::StatusCode code) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_reports_ = n;
    report_code_ = code;
  }

  grpc::Status WatchBudgets(grpc::ServerContext* context, const pb::WatchBudgetsRequest* request,
                            grpc::ServerWriter<pb::BudgetAssignment>* writer) override {
    std::optional<Stream> script;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watches_.push_back(*request);
      if (!scripts_.empty()) {
        script = std::move(scripts_.front());
        scripts_.pop_front();
      }
      cv_.notify_all();
    }
    if (script) {
      for (const pb::BudgetAssignment& a : script->send) writer->Write(a);
      if (!script->end.ok()) return script->end;
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (!context->IsCancelled()) cv_.wait_for(lock, 5ms);
    return grpc::Status::CANCELLED;
  }

  grpc::Status ReportBudget(grpc::ServerContext*, const pb::ReportBudgetRequest* request,
                            pb::ReportBudgetResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++report_calls_;
    cv_.notify_all();
    if (failing_reports_ > 0) {
      --failing_reports_;
      return grpc::Status(report_code_, "not now");
    }
    reports_.push_back(*request);
    return grpc::Status::OK;
  }

  // Waits (at most 10 s) until `done` holds over the recorded calls.
  bool WaitFor(const std::function<bool()>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, done);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Stream> scripts_;
  std::vector<pb::WatchBudgetsRequest> watches_;
  std::vector<pb::ReportBudgetRequest> reports_;
  int report_calls_ = 0;
  int failing_reports_ = 0;
  grpc::StatusCode report_code_ = grpc::StatusCode::UNAVAILABLE;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::path(::testing::TempDir()) / "agent_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    grpc::ServerBuilder builder;
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_ = {.node_id = "node-1",
                .model_hash = kModel,
                .map_path = (dir_ / "budgets.json").string(),
                .format = method::BudgetFormat::kTrtllm,
                .write_log_path = (dir_ / "writes.jsonl").string(),
                .initial_backoff = 5ms,
                .max_backoff = 20ms};
  }
  void TearDown() override {
    StopAgent();
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }

  // A hook that appends "version=$RIPPLEKV_MAP_VERSION rollout=..." to hook.log, then runs `tail`.
  std::string RecordingHook(const std::string& tail = "exit 0") const {
    return "echo \"version=$RIPPLEKV_MAP_VERSION rollout=$RIPPLEKV_ROLLOUT_ID "
           "node=$RIPPLEKV_NODE_ID file=$RIPPLEKV_MAP_FILE\" >> '" +
           (dir_ / "hook.log").string() + "'; " + tail;
  }

  void StartAgent() {
    StatusOr<std::unique_ptr<Agent>> agent =
        Agent::Create(options_, server_->InProcessChannel(grpc::ChannelArguments()));
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    run_done_ = false;
    runner_ = std::thread([this] {
      run_status_ = agent_->Run();
      run_done_ = true;
    });
  }
  // Stops the agent and returns how long Run() took to return.
  std::chrono::steady_clock::duration StopAgent() {
    if (!runner_.joinable()) return {};
    const auto start = std::chrono::steady_clock::now();
    agent_->Stop();
    runner_.join();
    return std::chrono::steady_clock::now() - start;
  }
  // Waits (at most 10 s, then stops it) for Run() to return on its own.
  Status JoinAgent() {
    for (int i = 0; i < 2000 && !run_done_; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(run_done_) << "Run() did not return on its own";
    if (!run_done_) agent_->Stop();
    runner_.join();
    return run_status_;
  }

  static std::string Read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::vector<std::string> Lines(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  std::vector<nlohmann::json> WriteLog() const {
    std::vector<nlohmann::json> out;
    for (const std::string& line : Lines(dir_ / "writes.jsonl")) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }
  size_t Reports() {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    return fake_.reports_.size();
  }

  FakeRollouts fake_;
  std::unique_ptr<grpc::Server> server_;
  std::filesystem::path dir_;
  AgentOptions options_;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
  Status run_status_;
  std::atomic<bool> run_done_{false};
};

TEST_F(AgentTest, WritesReportsAndStatesTheVersionOnReconnect) {
  const Version v1 = MakeVersion(64);
  options_.apply_command = RecordingHook();
  fake_.Script({.send = {Assign(v1, "r1")}});  // then UNAVAILABLE: a server restart
  fake_.Script({.send = {Assign(v1, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 2; }));

  std::lock_guard<std::mutex> lock(fake_.mu_);
  ASSERT_EQ(fake_.watches_.size(), 2u);
  EXPECT_EQ(fake_.watches_[0].node_id(), "node-1");
  EXPECT_EQ(fake_.watches_[0].model_hash(), kModel);
  EXPECT_EQ(fake_.watches_[0].held_version(), "");
  EXPECT_EQ(fake_.watches_[1].held_version(), v1.id);
  for (const pb::ReportBudgetRequest& r : fake_.reports_) {
    EXPECT_EQ(r.node_id(), "node-1");
    EXPECT_EQ(r.model_hash(), kModel);
    EXPECT_EQ(r.version(), v1.id);
    EXPECT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.hook_exit_code(), 0);
  }
  StatusOr<std::string> rendered =
      method::RenderFrozenMap(v1.frozen, method::BudgetFormat::kTrtllm);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(Read(options_.map_path), *rendered);
  HeldMapRead held = ReadHeldMap(options_.map_path, kModel, "trtllm");
  EXPECT_EQ(held.held.version, v1.id);
  EXPECT_EQ(held.held.rollout_id, "r1");
  EXPECT_TRUE(held.held.applied);
  // The second assignment of the same applied version rewrote nothing and ran no hook.
  EXPECT_EQ(Lines(dir_ / "hook.log"),
            std::vector<std::string>{"version=" + v1.id +
                                     " rollout=r1 node=node-1 file=" + options_.map_path});
  const std::vector<nlohmann::json> log = WriteLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0]["version"], v1.id);
  EXPECT_EQ(log[0]["rollout_id"], "r1");
  EXPECT_EQ(log[0]["ok"], true);
  EXPECT_GT(log[0]["time_ms"].get<int64_t>(), 1'600'000'000'000);
}

TEST_F(AgentTest, HookFailureIsReportedAndTheVersionIsNotStated) {
  const Version v1 = MakeVersion(64);
  options_.apply_command = RecordingHook("echo loading >&2; echo 'bad config' >&2; exit 3");
  fake_.Script({.send = {Assign(v1, "r1")}});
  fake_.Script({.send = {Assign(v1, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 2; }));

  std::lock_guard<std::mutex> lock(fake_.mu_);
  EXPECT_EQ(fake_.watches_[1].held_version(), "");  // written, not applied
  for (const pb::ReportBudgetRequest& r : fake_.reports_) {
    EXPECT_EQ(r.version(), v1.id);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.error(), "apply hook exited 3: bad config");
    EXPECT_EQ(r.hook_exit_code(), 3);
  }
  // Not applied, so the same version is written and hooked again.
  EXPECT_EQ(Lines(dir_ / "hook.log").size(), 2u);
  const HeldMapRead held = ReadHeldMap(options_.map_path, kModel, "trtllm");
  EXPECT_EQ(held.held.version, v1.id);
  EXPECT_FALSE(held.held.applied);
  const std::vector<nlohmann::json> log = WriteLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["ok"], false);
}

TEST_F(AgentTest, EmptyAssignmentRemovesTheFilesAndRunsTheHook) {
  const Version v1 = MakeVersion(64);
  options_.apply_command = RecordingHook();
  fake_.Script({.send = {Assign(v1, "r1"), Unassign("r2")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 2; }));

  EXPECT_FALSE(std::filesystem::exists(options_.map_path));
  EXPECT_FALSE(std::filesystem::exists(SidecarPath(options_.map_path)));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_EQ(fake_.reports_[1].version(), "");
    EXPECT_TRUE(fake_.reports_[1].ok());
  }
  const std::vector<std::string> hooks = Lines(dir_ / "hook.log");
  ASSERT_EQ(hooks.size(), 2u);
  EXPECT_THAT(hooks[1], HasSubstr("version= rollout=r2"));
  const std::vector<nlohmann::json> log = WriteLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1]["version"], "");
  EXPECT_EQ(log[1]["rollout_id"], "r2");
  EXPECT_EQ(log[1]["ok"], true);
  EXPECT_EQ(agent_->stats().held_version, "");
}

TEST_F(AgentTest, EmptyAssignmentWithNothingHeldOnlyReports) {
  options_.apply_command = RecordingHook();
  fake_.Script({.send = {Unassign("")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_TRUE(fake_.reports_[0].ok());
    EXPECT_EQ(fake_.reports_[0].version(), "");
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "hook.log"));
  EXPECT_TRUE(WriteLog().empty());
}

TEST_F(AgentTest, RenderErrorIsReportedAndLeavesTheFileUntouched) {
  const Version no_context = MakeVersion(64, std::nullopt);
  options_.format = method::BudgetFormat::kKvpress;
  options_.apply_command = RecordingHook();
  std::ofstream(options_.map_path) << "the old map";
  fake_.Script({.send = {Assign(no_context, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_FALSE(fake_.reports_[0].ok());
    EXPECT_EQ(fake_.reports_[0].version(), no_context.id);
    EXPECT_THAT(fake_.reports_[0].error(), HasSubstr("kvpress"));
  }
  EXPECT_EQ(Read(options_.map_path), "the old map");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "hook.log"));
}

TEST_F(AgentTest, NativeNodeWritesAPerHeadMapWithItsHeadBudgets) {
  const Version v = MakePerHeadVersion();
  options_.format = method::BudgetFormat::kNative;
  fake_.Script({.send = {Assign(v, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_TRUE(fake_.reports_[0].ok()) << fake_.reports_[0].error();
  }
  const nlohmann::json written = nlohmann::json::parse(Read(options_.map_path));
  EXPECT_EQ(written["schema_version"], 2);
  EXPECT_EQ(written["layers"][1]["head_tokens"], nlohmann::json::parse("[150, 213]"));
  StatusOr<method::BudgetMap> back = method::BudgetMapFromJson(Read(options_.map_path));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->head_tokens, v.frozen.map.head_tokens);
  EXPECT_EQ(ReadHeldMap(options_.map_path, kModel, "native").held.version, v.id);
}

TEST_F(AgentTest, KvpressNodeWritesHeadCompressionRatiosOfAPerHeadMap) {
  const Version v = MakePerHeadVersion();
  options_.format = method::BudgetFormat::kKvpress;
  fake_.Script({.send = {Assign(v, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_TRUE(fake_.reports_[0].ok()) << fake_.reports_[0].error();
  }
  const nlohmann::json written = nlohmann::json::parse(Read(options_.map_path));
  ASSERT_EQ(written["compression_ratios"].size(), 3u);
  ASSERT_EQ(written["head_compression_ratios"].size(), 3u);
  // Head 1 of layer 1 keeps 213 of the map's 4096-token context.
  EXPECT_NEAR(written["head_compression_ratios"][1][1].get<double>(), 1.0 - 213.0 / 4096.0, 1e-12);
}

TEST_F(AgentTest, TrtllmNodeReportsAPerHeadMapAsAnApplyFailure) {
  const Version v = MakePerHeadVersion();
  options_.format = method::BudgetFormat::kTrtllm;
  options_.apply_command = RecordingHook();
  std::ofstream(options_.map_path) << "the old map";
  fake_.Script({.send = {Assign(v, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_FALSE(fake_.reports_[0].ok());
    EXPECT_EQ(fake_.reports_[0].version(), v.id);
    EXPECT_THAT(fake_.reports_[0].error(), HasSubstr("one window per layer"));
    EXPECT_THAT(fake_.reports_[0].error(), HasSubstr("without --per-head"));
  }
  EXPECT_EQ(Read(options_.map_path), "the old map");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "hook.log"));
  EXPECT_EQ(agent_->stats().failures, 1);
}

TEST_F(AgentTest, DocumentNotMatchingItsVersionIsRefused) {
  const Version v1 = MakeVersion(64);
  pb::BudgetAssignment tampered = Assign(v1, "r1");
  tampered.set_version("0123456789abcdef");
  tampered.mutable_map()->set_version("0123456789abcdef");
  fake_.Script({.send = {tampered}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  std::lock_guard<std::mutex> lock(fake_.mu_);
  EXPECT_FALSE(fake_.reports_[0].ok());
  EXPECT_THAT(fake_.reports_[0].error(), HasSubstr("does not match version 0123456789abcdef"));
  EXPECT_FALSE(std::filesystem::exists(options_.map_path));
}

TEST_F(AgentTest, StatesWhatTheSidecarSaysAtStart) {
  const Version v1 = MakeVersion(64);
  StatusOr<std::string> rendered =
      method::RenderFrozenMap(v1.frozen, method::BudgetFormat::kTrtllm);
  ASSERT_TRUE(rendered.ok());
  ASSERT_TRUE(WriteMapFile(options_.map_path, *rendered,
                           {.model_hash = kModel,
                            .version = v1.id,
                            .rollout_id = "r1",
                            .format = "trtllm",
                            .applied = true})
                  .ok());
  fake_.Script({.send = {Assign(v1, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(fake_.mu_);
    EXPECT_EQ(fake_.watches_[0].held_version(), v1.id);
    EXPECT_TRUE(fake_.reports_[0].ok());
  }
  EXPECT_TRUE(WriteLog().empty());  // nothing rewritten
}

TEST_F(AgentTest, MalformedSidecarAtStartHoldsNothing) {
  std::ofstream(options_.map_path) << "a map";
  std::ofstream(SidecarPath(options_.map_path)) << "{not json";
  fake_.Script({.end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.watches_.size() == 1; }));
  std::lock_guard<std::mutex> lock(fake_.mu_);
  EXPECT_EQ(fake_.watches_[0].held_version(), "");
}

TEST_F(AgentTest, ReportsAreRetriedWhileTheSchedulerIsUnavailable) {
  const Version v1 = MakeVersion(64);
  fake_.FailReports(2, grpc::StatusCode::UNAVAILABLE);
  fake_.Script({.send = {Assign(v1, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.reports_.size() == 1; }));
  std::lock_guard<std::mutex> lock(fake_.mu_);
  EXPECT_EQ(fake_.report_calls_, 3);
  EXPECT_TRUE(fake_.reports_[0].ok());
}

TEST_F(AgentTest, RefusalsEndRunWithTheirCode) {
  for (const grpc::StatusCode code :
       {grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::UNAUTHENTICATED,
        grpc::StatusCode::INVALID_ARGUMENT}) {
    fake_.Script({.end = grpc::Status(code, "no")});
    StartAgent();
    const Status s = JoinAgent();
    EXPECT_EQ(static_cast<int>(s.code()), static_cast<int>(code));
  }
}

TEST_F(AgentTest, OtherStreamEndsAreRetried) {
  for (const grpc::StatusCode code :
       {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::ABORTED, grpc::StatusCode::INTERNAL}) {
    fake_.Script({.end = grpc::Status(code, "again")});
  }
  fake_.Script({.end = grpc::Status::OK});
  StartAgent();
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.watches_.size() == 4; }));
  EXPECT_LT(StopAgent(), 2s);
  EXPECT_TRUE(run_status_.ok()) << run_status_;
  EXPECT_EQ(agent_->stats().streams, 4);
}

TEST_F(AgentTest, StopDuringTheHookKillsItAndReturnsPromptly) {
  const Version v1 = MakeVersion(64);
  options_.apply_command = "sleep 60";
  fake_.Script({.send = {Assign(v1, "r1")}, .end = grpc::Status::OK});
  StartAgent();
  // The file is written before the hook starts.
  for (int i = 0; i < 1000 && agent_->stats().writes == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(agent_->stats().writes, 1);
  std::this_thread::sleep_for(50ms);
  EXPECT_LT(StopAgent(), 2s);
  EXPECT_TRUE(run_status_.ok()) << run_status_;
  EXPECT_EQ(Reports(), 0u);
  const HeldMapRead held = ReadHeldMap(options_.map_path, kModel, "trtllm");
  EXPECT_EQ(held.held.version, v1.id);
  EXPECT_FALSE(held.held.applied);
}

}  // namespace
}  // namespace ripplekv::agent
