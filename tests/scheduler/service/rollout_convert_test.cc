// The one conversion between rollout messages and the rollout library's types: every field
// crosses, unset request fields stay unset (the engine's defaults), times are milliseconds.

#include "scheduler/service/rollout_convert.h"

#include <google/protobuf/util/time_util.h>

#include <memory>

#include "gtest/gtest.h"
#include "method/budget_map.h"

namespace ripplekv::scheduler::service {
namespace {

using google::protobuf::util::TimeUtil;

TEST(RolloutConvertTest, RequestFieldsCrossAndUnsetOnesStayUnset) {
  v1::CreateRolloutRequest request;
  request.set_model_hash("ab");
  request.set_map_version("0123456789abcdef");
  request.add_stages()->set_nodes(2);
  request.add_stages()->set_percent(100);
  request.add_stages();  // no size: the engine refuses it, naming the stage
  *request.mutable_soak() = TimeUtil::MillisecondsToDuration(1'500);
  rollout::RolloutRequest r = RolloutRequestFromProto(request);
  EXPECT_EQ(r.model_hash, "ab");
  EXPECT_EQ(r.map_version, "0123456789abcdef");
  ASSERT_EQ(r.stages.size(), 3u);
  EXPECT_EQ(r.stages[0], (store::RolloutStage{.nodes = 2}));
  EXPECT_EQ(r.stages[1], (store::RolloutStage{.percent = 100}));
  EXPECT_EQ(r.stages[2], store::RolloutStage{});
  EXPECT_EQ(r.soak_ms, 1'500);
  EXPECT_FALSE(r.stage_timeout_ms.has_value());
  EXPECT_FALSE(r.min_ack_share.has_value());

  *request.mutable_stage_timeout() = TimeUtil::MillisecondsToDuration(60'000);
  request.set_min_ack_share(0.5);
  r = RolloutRequestFromProto(request);
  EXPECT_EQ(r.stage_timeout_ms, 60'000);
  EXPECT_EQ(r.min_ack_share, 0.5);
}

TEST(RolloutConvertTest, EveryFieldOfARolloutCrosses) {
  rollout::RolloutView view{.rollout_id = "r7",
                            .record = {.id = 7,
                                       .model_hash = "ab",
                                       .map_version = "0123456789abcdef",
                                       .previous_version = "fedcba9876543210",
                                       .stages = {{.nodes = 1}, {.percent = 100}},
                                       .soak_ms = 2'000,
                                       .stage_timeout_ms = 60'000,
                                       .min_ack_share = 0.75,
                                       .state = store::RolloutState::kPaused,
                                       .stage = 1,
                                       .pause_reason = "node n1 failed",
                                       .created_at_ms = 1'000,
                                       .updated_at_ms = 3'000,
                                       .stage_started_at_ms = 2'000},
                            .stage_nodes = 4,
                            .acknowledged = 2,
                            .pending = 1,
                            .failed = 1,
                            .connected_nodes = 5,
                            .soak_left_ms = 250,
                            .nodes = {{.record = {.node_id = "n1",
                                                  .in_rollout = true,
                                                  .assigned_version = "0123456789abcdef",
                                                  .held_version = "fedcba9876543210",
                                                  .state = store::NodeMapState::kFailed,
                                                  .error = "hook exited 3",
                                                  .updated_at_ms = 2'500},
                                       .connected = true},
                                      {.record = {.node_id = "n2",
                                                  .assigned_version = "fedcba9876543210",
                                                  .held_version = "fedcba9876543210",
                                                  .state = store::NodeMapState::kApplied}}}};
  const v1::Rollout r = RolloutToProto(view);
  EXPECT_EQ(r.rollout_id(), "r7");
  EXPECT_EQ(r.model_hash(), "ab");
  EXPECT_EQ(r.map_version(), "0123456789abcdef");
  EXPECT_EQ(r.previous_version(), "fedcba9876543210");
  ASSERT_EQ(r.stages_size(), 2);
  EXPECT_EQ(r.stages(0).nodes(), 1);
  EXPECT_EQ(r.stages(1).percent(), 100);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(r.soak()), 2'000);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(r.stage_timeout()), 60'000);
  EXPECT_EQ(r.min_ack_share(), 0.75);
  EXPECT_EQ(r.state(), v1::ROLLOUT_STATE_PAUSED);
  EXPECT_EQ(r.stage(), 1);
  EXPECT_EQ(r.pause_reason(), "node n1 failed");
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(r.create_time()), 1'000);
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(r.update_time()), 3'000);
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(r.stage_start_time()), 2'000);
  EXPECT_EQ(r.stage_nodes(), 4);
  EXPECT_EQ(r.acknowledged(), 2);
  EXPECT_EQ(r.pending(), 1);
  EXPECT_EQ(r.failed(), 1);
  EXPECT_EQ(r.connected_nodes(), 5);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(r.soak_left()), 250);
  ASSERT_EQ(r.nodes_size(), 2);
  const v1::RolloutNode& n1 = r.nodes(0);
  EXPECT_EQ(n1.node_id(), "n1");
  EXPECT_TRUE(n1.in_rollout());
  EXPECT_EQ(n1.assigned_version(), "0123456789abcdef");
  EXPECT_EQ(n1.held_version(), "fedcba9876543210");
  EXPECT_EQ(n1.state(), v1::NODE_MAP_STATE_FAILED);
  EXPECT_EQ(n1.error(), "hook exited 3");
  EXPECT_TRUE(n1.connected());
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(n1.update_time()), 2'500);
  // A connected node never recorded has no update time.
  EXPECT_EQ(r.nodes(1).state(), v1::NODE_MAP_STATE_APPLIED);
  EXPECT_FALSE(r.nodes(1).has_update_time());

  // Not soaking: no soak_left; the other states.
  view.soak_left_ms.reset();
  view.record.state = store::RolloutState::kRolledBack;
  EXPECT_FALSE(RolloutToProto(view).has_soak_left());
  EXPECT_EQ(RolloutToProto(view).state(), v1::ROLLOUT_STATE_ROLLED_BACK);
}

TEST(RolloutConvertTest, AnAssignmentCarriesItsWholeMap) {
  StatusOr<method::BudgetMap> computed = method::ComputeBudgetMap(
      std::vector<double>{0.1, 0.4}, method::BudgetOptions{.ratio = 2.0, .average_tokens = 64});
  ASSERT_TRUE(computed.ok()) << computed.status();
  computed->model_hash = "ab";
  const method::FrozenMap frozen{.profile_version = 3, .map = *computed};
  StatusOr<std::string> document = method::FrozenMapToJson(frozen);
  ASSERT_TRUE(document.ok()) << document.status();
  auto map = std::make_shared<const rollout::MapVersion>(
      rollout::MapVersion{.record = {.model_hash = "ab",
                                     .version = 2,
                                     .profile_version = 3,
                                     .budget_json = *document,
                                     .digest = "0123456789abcdef",
                                     .created_at_ms = 5'000},
                          .frozen = frozen});
  const v1::BudgetAssignment a = AssignmentToProto(
      {.model_hash = "ab", .version = "0123456789abcdef", .rollout_id = "r1", .map = map});
  EXPECT_EQ(a.model_hash(), "ab");
  EXPECT_EQ(a.version(), "0123456789abcdef");
  EXPECT_EQ(a.rollout_id(), "r1");
  EXPECT_EQ(a.map().version(), "0123456789abcdef");
  EXPECT_EQ(a.map().sequence(), 2);
  EXPECT_EQ(a.map().profile_version(), 3);
  EXPECT_EQ(a.map().document(), *document);
  EXPECT_EQ(a.map().tokens_size(), 2);
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(a.map().create_time()), 5'000);
  // No map: the node removes what it holds.
  const v1::BudgetAssignment none = AssignmentToProto({.model_hash = "ab"});
  EXPECT_EQ(none.version(), "");
  EXPECT_FALSE(none.has_map());
}

TEST(RolloutConvertTest, APerHeadVersionSaysSoAndItsDocumentHoldsTheHeadBudgets) {
  method::BudgetMap map;
  map.model_hash = "ab";
  map.objective = method::Objective::kResponse;
  map.options = {.ratio = 4.0, .average_tokens = 100, .per_head = true};
  map.total_tokens = 300;
  map.tokens = {46, 182, 72};
  map.head_tokens = {{40, 53}, {150, 213}, {70, 74}};
  map.multipliers = {1.0, 182.0 / 46.0, 72.0 / 46.0};
  map.normalized = {0.0, 1.0, 0.5};
  const method::FrozenMap frozen{.profile_version = 1, .map = map};
  StatusOr<std::string> document = method::FrozenMapToJson(frozen);
  ASSERT_TRUE(document.ok()) << document.status();
  const v1::BudgetMapVersion out = BudgetMapVersionToProto(
      {.record = {.model_hash = "ab", .version = 1, .profile_version = 1, .budget_json = *document},
       .frozen = frozen},
      /*full=*/true);
  EXPECT_TRUE(out.params().per_head());
  EXPECT_EQ(out.tokens_size(), 3);
  EXPECT_EQ(out.document(), *document);
  EXPECT_NE(out.document().find("\"head_tokens\""), std::string::npos);
}

}  // namespace
}  // namespace ripplekv::scheduler::service
