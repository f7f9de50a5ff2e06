// The migration of schema version 3, whose rollout values were the API's protobuf bytes, to
// version 4 (the store's own encoding): old records written with the generated API into a real
// RocksDB are all read back, field for field, and rewritten; a damaged one stops the migration
// with nothing changed. One record is also pinned as fixed bytes, so that the tests keep
// describing version 3 whatever becomes of rollout.proto.

#include <google/protobuf/util/time_util.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ripplekv/v1/rollout.pb.h"
#include "store/keys.h"
#include "store/legacy/decode_v3_rollouts.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {

// Readable failure messages (found by argument-dependent lookup).
void PrintTo(const RolloutRecord& r, std::ostream* os) {
  *os << r.id << ":" << r.model_hash << " " << RolloutStateName(r.state) << " stage " << r.stage
      << "/" << r.stages.size() << " '" << r.pause_reason << "'";
}
void PrintTo(const RolloutNodeRecord& r, std::ostream* os) {
  *os << "'" << r.node_id << "':" << NodeMapStateName(r.state) << " '" << r.error << "'";
}

namespace {

using ::google::protobuf::util::TimeUtil;
using ::ripplekv::store::testing::GetRaw;
using ::ripplekv::store::testing::PutRaw;
using ::ripplekv::store::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace v1 = ::ripplekv::v1;

const StoreOptions kOptions{.sync_writes = false};
const std::string kMapA = "0123456789abcdef";
const std::string kMapB = "fedcba9876543210";
constexpr int64_t kT0 = 1'700'000'000'123;

// An empty database of the current version with every column family, then marked version 3.
void CreateVersionThreeDatabase(const std::string& path) {
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(path, kOptions);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  ASSERT_TRUE(PutRaw(path, kMetaCf, kSchemaVersionKey, "3"));
}

// Writes `rollout` as version 3 did: the message without its id, under the id's key.
void PutOldRollout(const std::string& path, uint64_t id, v1::Rollout rollout) {
  rollout.clear_rollout_id();
  ASSERT_TRUE(PutRaw(path, kRolloutsCf, RolloutKey(id), rollout.SerializeAsString()));
  ASSERT_TRUE(PutRaw(path, kMetaCf, kNextRolloutIdKey, RolloutKey(id + 1)));
}

void PutOldNode(const std::string& path, uint64_t id, const v1::RolloutNode& node) {
  ASSERT_TRUE(
      PutRaw(path, kRolloutNodesCf, RolloutNodeKey(id, node.node_id()), node.SerializeAsString()));
}

v1::Rollout OldRollout(const std::string& model_hash, v1::RolloutState state) {
  v1::Rollout r;
  r.set_model_hash(model_hash);
  r.set_map_version(kMapA);
  r.add_stages()->set_nodes(1);
  r.add_stages()->set_percent(10);
  r.add_stages()->set_percent(100);
  *r.mutable_soak() = TimeUtil::MillisecondsToDuration(1'500);
  *r.mutable_stage_timeout() = TimeUtil::MillisecondsToDuration(300'000);
  r.set_min_ack_share(0.8);
  r.set_state(state);
  r.set_stage(2);
  *r.mutable_create_time() = TimeUtil::MillisecondsToTimestamp(kT0);
  *r.mutable_update_time() = TimeUtil::MillisecondsToTimestamp(kT0 + 2'000);
  *r.mutable_stage_start_time() = TimeUtil::MillisecondsToTimestamp(kT0 + 1'000);
  return r;
}

RolloutRecord NewRollout(uint64_t id, const std::string& model_hash, RolloutState state) {
  return {.id = id,
          .model_hash = model_hash,
          .map_version = kMapA,
          .previous_version = "",
          .stages = {{.nodes = 1}, {.percent = 10}, {.percent = 100}},
          .soak_ms = 1'500,
          .stage_timeout_ms = 300'000,
          .min_ack_share = 0.8,
          .state = state,
          .stage = 2,
          .pause_reason = "",
          .created_at_ms = kT0,
          .updated_at_ms = kT0 + 2'000,
          .stage_started_at_ms = kT0 + 1'000};
}

v1::RolloutNode OldNode(const std::string& node_id, v1::NodeMapState state) {
  v1::RolloutNode n;
  n.set_node_id(node_id);
  n.set_in_rollout(true);
  n.set_assigned_version(kMapA);
  n.set_held_version(state == v1::NODE_MAP_STATE_APPLIED ? kMapA : kMapB);
  n.set_state(state);
  *n.mutable_update_time() = TimeUtil::MillisecondsToTimestamp(kT0 + 3'000);
  return n;
}

RolloutNodeRecord NewNode(const std::string& node_id, NodeMapState state) {
  return {.node_id = node_id,
          .in_rollout = true,
          .assigned_version = kMapA,
          .held_version = state == NodeMapState::kApplied ? kMapA : kMapB,
          .state = state,
          .error = "",
          .updated_at_ms = kT0 + 3'000};
}

TEST(StoreRolloutMigrationTest, EveryVersionThreeRolloutIsReadAndRewritten) {
  TempDir dir;
  CreateVersionThreeDatabase(dir.db());
  // Rollout 1: succeeded, superseded. Rollout 2 (another model): paused with a reason in UTF-8,
  // a previous map, a failed node, a node outside the rollout and one whose report named another
  // version (state unspecified). Rollout 3: rolled back, a single stage.
  PutOldRollout(dir.db(), 1, OldRollout("ab", v1::ROLLOUT_STATE_SUCCEEDED));
  PutOldNode(dir.db(), 1, OldNode("n1", v1::NODE_MAP_STATE_APPLIED));
  PutOldNode(dir.db(), 1, OldNode("n2", v1::NODE_MAP_STATE_APPLIED));
  v1::Rollout paused = OldRollout("cd", v1::ROLLOUT_STATE_PAUSED);
  paused.set_previous_version(kMapB);
  paused.set_stage(0);
  paused.set_pause_reason("nœud n1 failed to apply map: hook exited 3");
  PutOldRollout(dir.db(), 2, paused);
  v1::RolloutNode failed = OldNode("n1", v1::NODE_MAP_STATE_FAILED);
  failed.set_error("apply hook exited 3: bad config");
  PutOldNode(dir.db(), 2, failed);
  v1::RolloutNode outside = OldNode("n2", v1::NODE_MAP_STATE_APPLIED);
  outside.set_in_rollout(false);
  outside.set_assigned_version(kMapB);
  outside.set_held_version(kMapB);
  PutOldNode(dir.db(), 2, outside);
  v1::RolloutNode unspecified = OldNode("n3", v1::NODE_MAP_STATE_UNSPECIFIED);
  PutOldNode(dir.db(), 2, unspecified);
  v1::Rollout rolled_back = OldRollout("ab", v1::ROLLOUT_STATE_ROLLED_BACK);
  rolled_back.clear_stages();
  rolled_back.add_stages()->set_percent(100);
  rolled_back.set_stage(0);
  rolled_back.clear_soak();  // zero: not on the wire
  PutOldRollout(dir.db(), 3, rolled_back);

  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  RolloutRecord expected_paused = NewRollout(2, "cd", RolloutState::kPaused);
  expected_paused.previous_version = kMapB;
  expected_paused.stage = 0;
  expected_paused.pause_reason = "nœud n1 failed to apply map: hook exited 3";
  RolloutRecord expected_rolled_back = NewRollout(3, "ab", RolloutState::kRolledBack);
  expected_rolled_back.stages = {{.percent = 100}};
  expected_rolled_back.stage = 0;
  expected_rolled_back.soak_ms = 0;
  std::vector<RolloutRecord> expected = {NewRollout(1, "ab", RolloutState::kSucceeded),
                                         expected_paused, expected_rolled_back};
  const auto check = [&](Store& s) {
    StatusOr<std::vector<RolloutRecord>> rollouts = s.ListRollouts();
    ASSERT_TRUE(rollouts.ok()) << rollouts.status();
    EXPECT_EQ(*rollouts, expected);
    EXPECT_EQ(*s.ListRolloutNodes(1),
              (std::vector<RolloutNodeRecord>{NewNode("n1", NodeMapState::kApplied),
                                              NewNode("n2", NodeMapState::kApplied)}));
    RolloutNodeRecord new_failed = NewNode("n1", NodeMapState::kFailed);
    new_failed.error = "apply hook exited 3: bad config";
    RolloutNodeRecord new_outside = NewNode("n2", NodeMapState::kApplied);
    new_outside.in_rollout = false;
    new_outside.assigned_version = kMapB;
    new_outside.held_version = kMapB;
    EXPECT_EQ(*s.ListRolloutNodes(2),
              (std::vector<RolloutNodeRecord>{new_failed, new_outside,
                                              NewNode("n3", NodeMapState::kUnspecified)}));
    EXPECT_TRUE(s.ListRolloutNodes(3)->empty());
  };
  check(**store);
  // The id counter carried over; a new rollout is written in the new encoding like the rest.
  RolloutRecord next = NewRollout(0, "ef", RolloutState::kRunning);
  StatusOr<RolloutRecord> created = (*store)->CreateRollout(next);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, NewRollout(4, "ef", RolloutState::kRunning));
  expected.push_back(*created);
  store->reset();

  // Rewritten on disk: the schema version and every value.
  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, kSchemaVersionKey), "4");
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_THAT(GetRaw(dir.db(), kRolloutsCf, RolloutKey(id)).value_or(""),
                StartsWith(R"({"created_at_ms":)"))
        << id;
  }
  EXPECT_THAT(GetRaw(dir.db(), kRolloutNodesCf, RolloutNodeKey(2, "n3")).value_or(""),
              StartsWith(R"({"assigned_version":)"));
  // Opening again migrates nothing and reads the same.
  store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  check(**store);
}

// The bytes of version-3 records, kept as they are (rollout.proto may change, these may not).
std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Model "ab", map 0123456789abcdef, stages (1 node, 100%), soak 0.25 s, stage timeout 60 s, share
// 1, running in stage 0, created at kT0 and updated and stage started one second later.
const std::string kOldRolloutHex =
    "120261621a10303132333435363738396162636465662a0208012a0911000000000000594032051080e59a773a"
    "02083c41000000000000f03f4801620b0880e2cfaa0610c0a9d33a6a0b0881e2cfaa0610c0a9d33a720b0881e2"
    "cfaa0610c0a9d33a";
// Node "n1" of it: in the rollout, assigned 0123456789abcdef, pending, updated at kT0 + 1000.
const std::string kOldNodeHex =
    "0a026e3110011a10303132333435363738396162636465662801420b0881e2cfaa0610c0a9d33a";

TEST(LegacyRolloutsTest, FixedVersionThreeBytesDecode) {
  StatusOr<RolloutRecord> rollout = DecodeV3Rollout(1, FromHex(kOldRolloutHex));
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  const RolloutRecord expected = {.id = 1,
                                  .model_hash = "ab",
                                  .map_version = kMapA,
                                  .stages = {{.nodes = 1}, {.percent = 100}},
                                  .soak_ms = 250,
                                  .stage_timeout_ms = 60'000,
                                  .min_ack_share = 1.0,
                                  .state = RolloutState::kRunning,
                                  .stage = 0,
                                  .created_at_ms = kT0,
                                  .updated_at_ms = kT0 + 1'000,
                                  .stage_started_at_ms = kT0 + 1'000};
  EXPECT_EQ(*rollout, expected);
  StatusOr<RolloutNodeRecord> node = DecodeV3RolloutNode("n1", FromHex(kOldNodeHex));
  ASSERT_TRUE(node.ok()) << node.status();
  const RolloutNodeRecord expected_node = {.node_id = "n1",
                                           .in_rollout = true,
                                           .assigned_version = kMapA,
                                           .state = NodeMapState::kPending,
                                           .updated_at_ms = kT0 + 1'000};
  EXPECT_EQ(*node, expected_node);
}

TEST(LegacyRolloutsTest, DamagedVersionThreeBytesAreDataLoss) {
  const std::string bytes = FromHex(kOldRolloutHex);
  const auto expect_loss = [](const Status& s, const std::string& names) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(names));
  };
  expect_loss(DecodeV3Rollout(1, bytes.substr(0, bytes.size() - 3)).status(), "is truncated");
  expect_loss(DecodeV3Rollout(1, "\x10\x01").status(),  // model_hash as a varint
              "field 'model_hash' has wire type 0, not 2");
  expect_loss(DecodeV3Rollout(1, "\x48\x05").status(), "rollout 1 has state 5");
  expect_loss(DecodeV3Rollout(1, "").status(), "has state 0");
  expect_loss(DecodeV3RolloutNode("n1", "\x28\x04").status(), "rollout node 'n1' has state 4");
  // Fields version 3 never stored (output only) are skipped as protobuf would.
  StatusOr<RolloutRecord> with_counts = DecodeV3Rollout(1, bytes + FromHex("a80107"));
  ASSERT_TRUE(with_counts.ok()) << with_counts.status();
  EXPECT_EQ(with_counts->model_hash, "ab");
}

TEST(LegacyRolloutsTest, NestedDamageIsDataLossNamingThePath) {
  const auto expect_loss = [](const Status& s, const std::string& names) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(names));
  };
  // soak {seconds: as a length-delimited field}, state 1.
  expect_loss(DecodeV3Rollout(1, FromHex("32020a004801")).status(),
              "rollout 1 field 'soak.seconds' has wire type 2, not 0");
  // stages {nodes: 1}, stages {percent: as a varint}, state 1.
  expect_loss(DecodeV3Rollout(1, FromHex("2a0208012a0210054801")).status(),
              "rollout 1 field 'stages[1].percent' has wire type 0, not 1");
  // update_time {seconds: beyond what milliseconds can hold}.
  expect_loss(DecodeV3RolloutNode("n1", FromHex("420a08ffffffffffffffff7f")).status(),
              "rollout node 'n1' is out of range");
  // error: not UTF-8, which version 3 could not have read either.
  expect_loss(DecodeV3RolloutNode("n1", FromHex("3201ff")).status(),
              "rollout node 'n1' is truncated or malformed");
}

TEST(StoreRolloutMigrationTest, FixedVersionThreeBytesAreMigrated) {
  TempDir dir;
  CreateVersionThreeDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutsCf, RolloutKey(1), FromHex(kOldRolloutHex)));
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutNodesCf, RolloutNodeKey(1, "n1"), FromHex(kOldNodeHex)));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->GetRollout(1), *DecodeV3Rollout(1, FromHex(kOldRolloutHex)));
  EXPECT_EQ(*(*store)->ListRolloutNodes(1),
            std::vector<RolloutNodeRecord>{*DecodeV3RolloutNode("n1", FromHex(kOldNodeHex))});
}

TEST(StoreRolloutMigrationTest, ADamagedRecordStopsTheMigrationAndChangesNothing) {
  TempDir dir;
  CreateVersionThreeDatabase(dir.db());
  PutOldRollout(dir.db(), 1, OldRollout("ab", v1::ROLLOUT_STATE_SUCCEEDED));
  const std::string truncated = OldNode("n1", v1::NODE_MAP_STATE_APPLIED).SerializeAsString();
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutNodesCf, RolloutNodeKey(1, "n1"),
                     truncated.substr(0, truncated.size() - 2)));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("column family 'rollout_nodes', key rollout=1 node='n1': version-3 "
                        "rollout node 'n1' is truncated"));
  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, kSchemaVersionKey), "3");
  v1::Rollout stored = OldRollout("ab", v1::ROLLOUT_STATE_SUCCEEDED);
  EXPECT_EQ(GetRaw(dir.db(), kRolloutsCf, RolloutKey(1)), stored.SerializeAsString());
}

}  // namespace
}  // namespace ripplekv::store
