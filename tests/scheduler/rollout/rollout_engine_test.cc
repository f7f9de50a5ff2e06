// The rollout state machine over a real store: node selection per stage, acknowledgements, soak
// and deadlines, failure and pause, resume, rollback, supersession and a restart from the store.

#include "scheduler/rollout/rollout_engine.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "method/frozen_map.h"
#include "scheduler/rollout/node_order.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::scheduler::rollout {
namespace {

using store::NodeMapState;
using store::RolloutState;

const std::string kModel(64, 'a');

// Records what a node's stream was offered.
class FakeSink : public AssignmentSink {
 public:
  void Offer(const Assignment& assignment, uint64_t sequence) override {
    EXPECT_GT(sequence, last_sequence);
    last_sequence = sequence;
    offers.push_back(assignment);
  }
  void Replace() override { replaced = true; }

  // The version last offered; "(none)" before any offer.
  std::string version() const { return offers.empty() ? "(none)" : offers.back().version; }

  std::vector<Assignment> offers;
  uint64_t last_sequence = 0;
  bool replaced = false;
};

class RolloutEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenStore();
    ASSERT_TRUE(store_->PutProfileVersion(kModel, R"({"profile": 1})").ok());
    map_a_ = Freeze(64);
    map_b_ = Freeze(96);
    LoadEngine();
  }

  void OpenStore() {
    StatusOr<std::unique_ptr<store::Store>> opened = store::OpenStore(dir_.db());
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = *std::move(opened);
  }

  void LoadEngine() {
    StatusOr<std::unique_ptr<RolloutEngine>> loaded =
        RolloutEngine::Load(store_.get(), {.now_ms = [this] { return now_ms_; }});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    engine_ = *std::move(loaded);
  }

  // A frozen map of 4 layers with `average` tokens each on average; returns its version id.
  std::string Freeze(int64_t average) {
    method::BudgetOptions options{.ratio = 2.0, .average_tokens = average};
    StatusOr<method::BudgetMap> map =
        method::ComputeBudgetMap(std::vector<double>{0.1, 0.4, 0.2, 0.3}, options);
    EXPECT_TRUE(map.ok()) << map.status();
    map->model_hash = kModel;
    StatusOr<std::string> doc = method::FrozenMapToJson({.profile_version = 1, .map = *map});
    EXPECT_TRUE(doc.ok()) << doc.status();
    StatusOr<store::BudgetMapPut> put = store_->PutBudgetMap(kModel, 1, *doc);
    EXPECT_TRUE(put.ok()) << put.status();
    return put->map.digest;
  }

  // Connects nodes n00..n{count-1}, each holding `held`.
  void Connect(int count, const std::string& held = "") {
    for (int i = 0; i < count; ++i) Watch(Name(i), held);
  }
  static std::string Name(int i) { return (i < 10 ? "n0" : "n") + std::to_string(i); }
  FakeSink& Watch(const std::string& node, const std::string& held = "") {
    auto sink = std::make_shared<FakeSink>();
    sinks_[node] = sink;
    EXPECT_TRUE(engine_->Watch(node, kModel, held, sink).ok());
    return *sink;
  }

  RolloutRequest Request(const std::string& map, std::vector<std::string> stages,
                         int64_t soak_ms = 0) {
    RolloutRequest request{.model_hash = kModel, .map_version = map, .soak_ms = soak_ms};
    for (const std::string& s : stages) {
      if (s.ends_with('%')) {
        request.stages.push_back({.percent = std::stod(s)});
      } else {
        request.stages.push_back({.nodes = std::stoi(s)});
      }
    }
    return request;
  }

  RolloutView Start(const RolloutRequest& request) {
    StatusOr<RolloutView> rollout = engine_->Create(request);
    EXPECT_TRUE(rollout.ok()) << rollout.status();
    return rollout.ok() ? *rollout : RolloutView();
  }

  RolloutView Get(const std::string& id) {
    StatusOr<RolloutView> rollout = engine_->Get(id, /*with_nodes=*/true);
    EXPECT_TRUE(rollout.ok()) << rollout.status();
    return rollout.ok() ? *rollout : RolloutView();
  }

  // Every connected node reports what it was last offered, applied (or failed).
  void ReportAll(bool ok = true) {
    for (auto& [node, sink] : sinks_) Report(node, sink->version(), ok);
  }
  Status Report(const std::string& node, const std::string& version, bool ok,
                const std::string& error = "") {
    return engine_->Report(
        {.node_id = node, .model_hash = kModel, .version = version, .ok = ok, .error = error});
  }

  // Nodes whose last offer is `version`.
  std::vector<std::string> Holding(const std::string& version) const {
    std::vector<std::string> out;
    for (const auto& [node, sink] : sinks_) {
      if (sink->version() == version) out.push_back(node);
    }
    return out;
  }

  // The first `n` of `nodes` in the rollout's rank order.
  static std::vector<std::string> FirstByRank(const std::string& rollout_id,
                                              std::vector<std::string> nodes, size_t n) {
    std::sort(nodes.begin(), nodes.end(), [&](const std::string& a, const std::string& b) {
      return NodeRank(rollout_id, a) < NodeRank(rollout_id, b);
    });
    nodes.resize(n);
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  }

  std::vector<std::string> AllNames(int count) const {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) out.push_back(Name(i));
    return out;
  }

  store::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RolloutEngine> engine_;
  std::map<std::string, std::shared_ptr<FakeSink>> sinks_;
  int64_t now_ms_ = 1'700'000'000'000;
  std::string map_a_;
  std::string map_b_;
};

TEST(NodeOrderTest, StageSizesRoundUpAndStayWithinTheConnectedNodes) {
  const store::RolloutStage nodes{.nodes = 3};
  store::RolloutStage percent{.percent = 10};
  EXPECT_EQ(StageSize(nodes, 0), 0u);
  EXPECT_EQ(StageSize(nodes, 2), 2u);
  EXPECT_EQ(StageSize(nodes, 50), 3u);
  EXPECT_EQ(StageSize(percent, 0), 0u);
  EXPECT_EQ(StageSize(percent, 1), 1u);
  EXPECT_EQ(StageSize(percent, 50), 5u);  // 0.1 * 50 is 5.000000000000001 in binary
  EXPECT_EQ(StageSize(percent, 51), 6u);
  percent.percent = 100;
  EXPECT_EQ(StageSize(percent, 1000), 1000u);
}

TEST(NodeOrderTest, RanksDependOnRolloutAndNode) {
  EXPECT_EQ(NodeRank("r1", "node-a"), NodeRank("r1", "node-a"));
  EXPECT_NE(NodeRank("r1", "node-a"), NodeRank("r2", "node-a"));
  EXPECT_NE(NodeRank("r1", "node-a"), NodeRank("r1", "node-b"));
  // Not a concatenation artefact: the separator keeps ("r1", "0a") and ("r10", "a") apart.
  EXPECT_NE(NodeRank("r1", "0a"), NodeRank("r10", "a"));
}

TEST_F(RolloutEngineTest, NodesWithoutARolloutAreToldNoMap) {
  FakeSink& sink = Watch("n00");
  ASSERT_EQ(sink.offers.size(), 1u);
  EXPECT_EQ(sink.offers[0].version, "");
  EXPECT_EQ(sink.offers[0].rollout_id, "");
}

TEST_F(RolloutEngineTest, StagesCoverTheFirstNodesByRankAndAdvanceOnAcknowledgement) {
  Connect(10);
  const RolloutView started = Start(Request(map_a_, {"1", "50%", "100%"}));
  ASSERT_EQ(started.rollout_id, "r1");
  EXPECT_EQ(started.record.state, RolloutState::kRunning);
  // The canary: the node of lowest rank, told the map together with the whole document.
  EXPECT_EQ(Holding(map_a_), FirstByRank("r1", AllNames(10), 1));
  const Assignment& canary = sinks_[Holding(map_a_)[0]]->offers.back();
  EXPECT_EQ(canary.rollout_id, "r1");
  EXPECT_EQ(canary.map->record.digest, map_a_);
  EXPECT_TRUE(method::FrozenMapFromJson(canary.map->record.budget_json).ok());
  EXPECT_EQ(Get("r1").record.stage, 0);

  ASSERT_TRUE(Report(Holding(map_a_)[0], map_a_, true).ok());  // the canary acknowledges
  RolloutView r = Get("r1");
  EXPECT_EQ(r.record.stage, 1);
  EXPECT_EQ(Holding(map_a_), FirstByRank("r1", AllNames(10), 5));  // 50% of 10, canary included
  EXPECT_EQ(r.stage_nodes, 5);
  EXPECT_EQ(r.acknowledged, 1);
  EXPECT_EQ(r.pending, 4);

  ReportAll();
  r = Get("r1");
  EXPECT_EQ(r.record.stage, 2);
  EXPECT_EQ(Holding(map_a_).size(), 10u);
  ReportAll();
  r = Get("r1");
  EXPECT_EQ(r.record.state, RolloutState::kSucceeded);
  EXPECT_EQ(r.acknowledged, 10);
  ASSERT_EQ(r.nodes.size(), 10u);
  for (const NodeView& node : r.nodes) {
    EXPECT_EQ(node.record.held_version, map_a_) << node.record.node_id;
    EXPECT_EQ(node.record.state, NodeMapState::kApplied) << node.record.node_id;
  }
  // A node that joins after the rollout succeeded gets the new map.
  EXPECT_EQ(Watch("late").version(), map_a_);
}

TEST_F(RolloutEngineTest, AStageWaitsForItsSoakTime) {
  Connect(4);
  Start(Request(map_a_, {"1", "100%"}, /*soak_ms=*/10'000));
  ReportAll();
  RolloutView r = Get("r1");
  EXPECT_EQ(r.record.stage, 0);
  EXPECT_EQ(r.soak_left_ms.value_or(-1), 10'000);
  now_ms_ += 9'999;
  engine_->Tick();
  EXPECT_EQ(Get("r1").record.stage, 0);
  now_ms_ += 1;
  engine_->Tick();
  EXPECT_EQ(Get("r1").record.stage, 1);
  EXPECT_EQ(Holding(map_a_).size(), 4u);
}

TEST_F(RolloutEngineTest, AFailureReportPausesAndRollbackRestoresThePreviousMap) {
  // Map A is active everywhere first.
  Connect(6);
  Start(Request(map_a_, {"100%"}));
  ReportAll();
  ASSERT_EQ(Get("r1").record.state, RolloutState::kSucceeded);

  const RolloutView r2 = Start(Request(map_b_, {"1", "100%"}));
  EXPECT_EQ(r2.record.previous_version, map_a_);
  const std::vector<std::string> canary = Holding(map_b_);
  ASSERT_EQ(canary, FirstByRank("r2", AllNames(6), 1));
  ASSERT_TRUE(Report(canary[0], map_b_, false, "apply hook exited 3: bad config").ok());
  RolloutView r = Get("r2");
  EXPECT_EQ(r.record.state, RolloutState::kPaused);
  EXPECT_NE(r.record.pause_reason.find(canary[0]), std::string::npos) << r.record.pause_reason;
  EXPECT_NE(r.record.pause_reason.find("bad config"), std::string::npos) << r.record.pause_reason;
  EXPECT_EQ(r.failed, 1);
  // Paused: nobody else is added, whoever connects.
  Watch("n99", map_a_);
  EXPECT_EQ(Holding(map_b_), canary);

  // Resume sends the map to the failed node again (a fresh offer its agent retries on).
  const size_t offers = sinks_[canary[0]]->offers.size();
  ASSERT_TRUE(engine_->Resume("r2").ok());
  EXPECT_EQ(sinks_[canary[0]]->offers.size(), offers + 1);
  EXPECT_EQ(sinks_[canary[0]]->version(), map_b_);
  ASSERT_TRUE(Report(canary[0], map_b_, false, "apply hook exited 3: still bad").ok());
  EXPECT_EQ(Get("r2").record.state, RolloutState::kPaused);

  StatusOr<RolloutView> rolled = engine_->Rollback("r2");
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->record.state, RolloutState::kRolledBack);
  EXPECT_TRUE(Holding(map_b_).empty());
  EXPECT_EQ(Holding(map_a_).size(), sinks_.size());
  EXPECT_EQ(engine_->Rollback("r2").status().code(), absl::StatusCode::kFailedPrecondition);
  // A node connecting now gets A, the map the rollback restored.
  EXPECT_EQ(Watch("n98").version(), map_a_);
}

TEST_F(RolloutEngineTest, RollbackOfASucceededRolloutReachesNodesThatJoinedAfterIt) {
  Connect(3);
  Start(Request(map_a_, {"100%"}));
  ReportAll();
  Start(Request(map_b_, {"100%"}));
  ReportAll();
  ASSERT_EQ(Get("r2").record.state, RolloutState::kSucceeded);
  Watch("joined-later");
  EXPECT_EQ(Holding(map_b_).size(), 4u);
  ASSERT_TRUE(engine_->Rollback("r2").ok());
  EXPECT_EQ(Holding(map_a_).size(), 4u);
  // The superseded rollout cannot be rolled back any more.
  EXPECT_EQ(engine_->Rollback("r1").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RolloutEngineTest, AStageThatIsNotAcknowledgedInTimePausesWithTheCounts) {
  Connect(3);
  RolloutRequest request = Request(map_a_, {"1", "100%"});
  request.stage_timeout_ms = 60'000;
  Start(request);
  now_ms_ += 59'999;
  engine_->Tick();
  EXPECT_EQ(Get("r1").record.state, RolloutState::kRunning);
  now_ms_ += 1;
  engine_->Tick();
  const RolloutView r = Get("r1");
  EXPECT_EQ(r.record.state, RolloutState::kPaused);
  EXPECT_NE(r.record.pause_reason.find("0 of 1 nodes acknowledged"), std::string::npos)
      << r.record.pause_reason;
}

TEST_F(RolloutEngineTest, WithoutConnectedNodesAStageWaitsAndThenPauses) {
  Start(Request(map_a_, {"1", "100%"}));
  now_ms_ += kDefaultStageTimeoutMs;
  engine_->Tick();
  const RolloutView r = Get("r1");
  EXPECT_EQ(r.record.state, RolloutState::kPaused);
  EXPECT_NE(r.record.pause_reason.find("no node"), std::string::npos) << r.record.pause_reason;
}

TEST_F(RolloutEngineTest, MinimumAcknowledgedShareLetsAStageAdvanceWithoutStragglers) {
  Connect(10);
  RolloutRequest request = Request(map_a_, {"50%", "100%"});
  request.min_ack_share = 0.8;
  Start(request);
  std::vector<std::string> stage = Holding(map_a_);
  ASSERT_EQ(stage.size(), 5u);
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(Report(stage[i], map_a_, true).ok());
  EXPECT_EQ(Get("r1").record.stage, 0);  // 3 of 5 < 80%
  ASSERT_TRUE(Report(stage[3], map_a_, true).ok());
  EXPECT_EQ(Get("r1").record.stage, 1);  // 4 of 5
}

TEST_F(RolloutEngineTest, OneActiveRolloutPerModel) {
  Connect(2);
  Start(Request(map_a_, {"1", "100%"}));
  EXPECT_EQ(engine_->Create(Request(map_b_, {"100%"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(engine_->Pause("r1", "").ok());
  EXPECT_EQ(Get("r1").record.pause_reason, "paused by operator");
  EXPECT_EQ(engine_->Create(Request(map_b_, {"100%"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(engine_->Resume("r1").ok());
  ReportAll();
  ReportAll();
  ASSERT_EQ(Get("r1").record.state, RolloutState::kSucceeded);
  // The active map again: refused; another map supersedes the finished rollout.
  EXPECT_EQ(engine_->Create(Request(map_a_, {"100%"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Start(Request(map_b_, {"100%"})).rollout_id, "r2");
  // Listing: newest first.
  const std::vector<RolloutView> listed = engine_->List(kModel);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].rollout_id, "r2");
  // The superseded rollout's node records come from the store.
  EXPECT_EQ(Get("r1").nodes.size(), 2u);
}

TEST_F(RolloutEngineTest, CreateChecksItsArguments) {
  EXPECT_EQ(engine_->Create(Request("0123456789abcdef", {"100%"})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->Create(Request(map_a_, {"50%"})).status().code(),
            absl::StatusCode::kInvalidArgument);  // the last stage must be 100%
  EXPECT_EQ(engine_->Create(Request(map_a_, {"50%", "10%", "100%"})).status().code(),
            absl::StatusCode::kInvalidArgument);  // shrinking
  EXPECT_EQ(engine_->Create(Request(map_a_, {"0", "100%"})).status().code(),
            absl::StatusCode::kInvalidArgument);
  RolloutRequest request = Request(map_a_, {"100%"});
  request.min_ack_share = 1.5;
  EXPECT_EQ(engine_->Create(request).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Get("7", false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Get("r7", false).status().code(), absl::StatusCode::kNotFound);
  // Defaults: 1 node, 10%, 50%, 100%; acknowledged by all; 5 minute stages.
  const RolloutView r = Start(Request(map_a_, {}));
  ASSERT_EQ(r.record.stages.size(), 4u);
  EXPECT_EQ(r.record.stages[0].nodes.value_or(0), 1);
  EXPECT_EQ(r.record.stages[3].percent.value_or(0), 100);
  EXPECT_EQ(r.record.min_ack_share, 1.0);
  EXPECT_EQ(r.record.stage_timeout_ms, kDefaultStageTimeoutMs);
}

TEST_F(RolloutEngineTest, ANewerStreamOfANodeReplacesTheOlder) {
  FakeSink& first = Watch("n00");
  FakeSink& second = Watch("n00");
  EXPECT_TRUE(first.replaced);
  EXPECT_FALSE(second.replaced);
  // The old stream's end does not disconnect the node.
  engine_->Unwatch("n00", kModel, &first);
  Start(Request(map_a_, {"100%"}));
  EXPECT_EQ(second.version(), map_a_);
}

TEST_F(RolloutEngineTest, ReportsNeedAWatchAndCountOnlyForTheAssignedVersion) {
  EXPECT_EQ(Report("stranger", "", true).code(), absl::StatusCode::kFailedPrecondition);
  Connect(2);
  Start(Request(map_a_, {"1", "100%"}));
  const std::string canary = Holding(map_a_)[0];
  // A success for another version (what it held before) acknowledges nothing.
  ASSERT_TRUE(Report(canary, "", true).ok());
  EXPECT_EQ(Get("r1").record.stage, 0);
  ASSERT_TRUE(Report(canary, map_a_, true).ok());
  EXPECT_EQ(Get("r1").record.stage, 1);
}

TEST_F(RolloutEngineTest, AWatchOfAModelTheStoreDoesNotKnowIsNotFoundAndKeepsNothing) {
  for (int i = 0; i < 50; ++i) {
    const std::string unknown(64, "0123456789abcdef"[i % 16]);
    if (unknown == kModel) continue;
    auto sink = std::make_shared<FakeSink>();
    const Status s = engine_->Watch("n00", unknown, "", sink);
    ASSERT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_NE(std::string(s.message()).find(unknown), std::string::npos) << s;
    EXPECT_TRUE(sink->offers.empty());
  }
  EXPECT_EQ(engine_->tracked_nodes(), 0u);
  EXPECT_EQ(engine_->tracked_models(), 0u);
  // A model with a profile but no map yet is known: its nodes are told to hold no map.
  const std::string profiled(64, 'b');
  ASSERT_TRUE(store_->PutProfileVersion(profiled, R"({"profile": 1})").ok());
  auto sink = std::make_shared<FakeSink>();
  ASSERT_TRUE(engine_->Watch("n00", profiled, "", sink).ok());
  EXPECT_EQ(sink->version(), "");
}

TEST_F(RolloutEngineTest, ClosedStreamsLeaveNothingBehindWithoutARollout) {
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<FakeSink>> streams;
    for (int i = 0; i < 20; ++i) {
      streams.push_back(std::make_shared<FakeSink>());
      ASSERT_TRUE(engine_->Watch(Name(i), kModel, "", streams.back()).ok());
    }
    EXPECT_EQ(engine_->tracked_nodes(), 20u);
    EXPECT_EQ(engine_->tracked_models(), 1u);
    for (int i = 0; i < 20; ++i) engine_->Unwatch(Name(i), kModel, streams[i].get());
    EXPECT_EQ(engine_->tracked_nodes(), 0u) << "round " << round;
    EXPECT_EQ(engine_->tracked_models(), 0u) << "round " << round;
  }
}

TEST_F(RolloutEngineTest, MembersWhoseStreamsEndStayMembersAndMayStillReport) {
  Connect(4);
  Start(Request(map_a_, {"50%", "100%"}));
  const std::vector<std::string> members = Holding(map_a_);
  ASSERT_EQ(members.size(), 2u);
  for (const std::string& member : members) {
    engine_->Unwatch(member, kModel, sinks_.at(member).get());
  }
  EXPECT_EQ(engine_->tracked_nodes(), 2u);
  engine_->Tick();
  RolloutView r = Get("r1");
  // The stage still counts its two members; no connected node was added in their place.
  EXPECT_EQ(r.record.stage, 0);
  EXPECT_EQ(r.stage_nodes, 2);
  EXPECT_EQ(r.connected_nodes, 2);
  // The members applied the map before their streams ended: their reports still count.
  for (const std::string& member : members) ASSERT_TRUE(Report(member, map_a_, true).ok());
  EXPECT_EQ(Get("r1").record.stage, 1);
  // Everyone goes: the rollout keeps the model, the nodes go.
  for (const auto& [node, sink] : sinks_) engine_->Unwatch(node, kModel, sink.get());
  EXPECT_EQ(engine_->tracked_nodes(), 0u);
  EXPECT_EQ(engine_->tracked_models(), 1u);
}

TEST_F(RolloutEngineTest, ARestartResumesWhereTheStoreLeftIt) {
  Connect(10);
  Start(Request(map_a_, {"1", "50%", "100%"}));
  ReportAll();  // stage 2 (50%): 5 nodes hold A, 1 acknowledged
  const std::vector<std::string> members = Holding(map_a_);
  ASSERT_EQ(members.size(), 5u);
  const RolloutView before = Get("r1");

  // The process dies: engine and store go; the nodes reconnect to the new process.
  engine_.reset();
  store_.reset();
  sinks_.clear();
  OpenStore();
  LoadEngine();
  RolloutView after = Get("r1");
  EXPECT_EQ(after.record.stage, before.record.stage);
  EXPECT_EQ(after.record.state, RolloutState::kRunning);
  EXPECT_EQ(after.stage_nodes, 5);
  EXPECT_EQ(after.connected_nodes, 0);
  // Nodes report what they hold on reconnect. Non-members first: they keep no map although the
  // stage covers 50% of the connected (members stay members, none is added while enough are).
  for (int i = 0; i < 10; ++i) {
    if (std::count(members.begin(), members.end(), Name(i)) > 0) continue;
    EXPECT_EQ(Watch(Name(i), "").version(), "") << Name(i);
  }
  for (const std::string& member : members) EXPECT_EQ(Watch(member, map_a_).version(), map_a_);
  after = Get("r1");
  // Every member reported A held: the stage was acknowledged and the last one started.
  EXPECT_EQ(after.record.stage, 2);
  ReportAll();
  EXPECT_EQ(Get("r1").record.state, RolloutState::kSucceeded);
}

}  // namespace
}  // namespace ripplekv::scheduler::rollout
