// Rollouts: ids, atomic writes of a rollout's record and node records, ordering, argument checks,
// durability across reopen and a power cut (the per-call sync flag).

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/rocks_store.h"
#include "store/store.h"
#include "tests/store/power_loss_fs.h"
#include "tests/store/rollout_samples.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {

// Readable failure messages (found by argument-dependent lookup, so outside the anonymous
// namespace).
void PrintTo(const RolloutRecord& r, std::ostream* os) {
  *os << r.id << ":" << r.model_hash << " " << RolloutStateName(r.state) << " stage " << r.stage;
}
void PrintTo(const RolloutNodeRecord& r, std::ostream* os) {
  *os << "'" << r.node_id << "':" << NodeMapStateName(r.state) << " held '" << r.held_version
      << "'";
}

namespace {

using ::ripplekv::store::testing::PowerLossFs;
using ::ripplekv::store::testing::SampleNode;
using ::ripplekv::store::testing::SampleRollout;
using ::ripplekv::store::testing::StoreFixture;
using ::ripplekv::store::testing::TempDir;
using ::testing::HasSubstr;

using Nodes = std::vector<RolloutNodeRecord>;

// `r` with id `id`.
RolloutRecord WithId(RolloutRecord r, uint64_t id) {
  r.id = id;
  return r;
}

class RolloutTest : public StoreFixture {
 protected:
  uint64_t NewRollout(const RolloutRecord& rollout) {
    StatusOr<RolloutRecord> created = store_->CreateRollout(rollout);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return 0;
    EXPECT_EQ(*created, WithId(rollout, created->id));
    return created->id;
  }

  Nodes ListNodes(uint64_t id) {
    StatusOr<Nodes> nodes = store_->ListRolloutNodes(id);
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    return nodes.ok() ? *nodes : Nodes{};
  }

  RolloutRecord Get(uint64_t id) {
    StatusOr<RolloutRecord> rollout = store_->GetRollout(id);
    EXPECT_TRUE(rollout.ok()) << rollout.status();
    return rollout.ok() ? *rollout : RolloutRecord{};
  }

  // Asserts InvalidArgument whose message contains `names`.
  void ExpectInvalid(const Status& status, const std::string& names) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(names));
  }
};

TEST_F(RolloutTest, CreateRolloutAllocatesIdsFromOne) {
  EXPECT_TRUE(store_->ListRollouts()->empty());
  EXPECT_EQ(NewRollout(SampleRollout("first")), 1u);
  RolloutRecord no_stages = SampleRollout();
  no_stages.stages.clear();
  ExpectInvalid(store_->CreateRollout(no_stages).status(), "stages is empty");  // uses no id
  EXPECT_EQ(NewRollout(SampleRollout("second")), 2u);
  RolloutRecord paused = SampleRollout("third");
  paused.state = RolloutState::kPaused;
  paused.pause_reason = "node n1 failed: \"quoted\"\nand a second line";
  paused.stages = {{.nodes = 2}, {.percent = 12.5}, {.percent = 100}};
  paused.stage = 2;
  paused.min_ack_share = 0.1;  // not exact in binary: read back to the same bits
  EXPECT_EQ(NewRollout(paused), 3u);
  EXPECT_EQ(Get(3), WithId(paused, 3));
  const std::vector<RolloutRecord> expected = {
      WithId(SampleRollout("first"), 1), WithId(SampleRollout("second"), 2), WithId(paused, 3)};
  EXPECT_EQ(*store_->ListRollouts(), expected);
  EXPECT_TRUE(ListNodes(1).empty());
}

TEST_F(RolloutTest, WriteRolloutStoresTheRecordAndNodesListedByNodeId) {
  const uint64_t id = NewRollout(SampleRollout("one"));
  const uint64_t other = NewRollout(SampleRollout("other"));
  RolloutRecord advanced = SampleRollout("one");
  advanced.stage = 1;
  ASSERT_TRUE(store_
                  ->WriteRollout(id, &advanced,
                                 Nodes{SampleNode("n2"), SampleNode("n10"), SampleNode("a1")})
                  .ok());
  EXPECT_EQ(Get(id), WithId(advanced, id));
  const Nodes expected = {SampleNode("a1"), SampleNode("n10"),  // bytewise: "n10" < "n2"
                          SampleNode("n2")};
  EXPECT_EQ(ListNodes(id), expected);
  EXPECT_TRUE(ListNodes(other).empty());
  EXPECT_EQ(Get(other), WithId(SampleRollout("other"), other));
}

TEST_F(RolloutTest, WriteRolloutReplacesNodeRecordsAndKeepsTheRecordWhenUnset) {
  const uint64_t id = NewRollout(SampleRollout());
  ASSERT_TRUE(store_->WriteRollout(id, nullptr, Nodes{SampleNode("a"), SampleNode("b")}).ok());
  const RolloutNodeRecord failed = SampleNode("b", NodeMapState::kFailed);
  ASSERT_TRUE(store_
                  ->WriteRollout(id, nullptr,
                                 Nodes{failed, SampleNode("c", NodeMapState::kApplied)},
                                 /*sync=*/false)
                  .ok());
  EXPECT_EQ(Get(id), WithId(SampleRollout(), id));
  const Nodes expected = {SampleNode("a"), failed, SampleNode("c", NodeMapState::kApplied)};
  EXPECT_EQ(ListNodes(id), expected);
  RolloutRecord succeeded = SampleRollout();
  succeeded.state = RolloutState::kSucceeded;
  ASSERT_TRUE(store_->WriteRollout(id, &succeeded, {}).ok());  // the record alone
  EXPECT_EQ(Get(id), WithId(succeeded, id));
  EXPECT_EQ(ListNodes(id), expected);
}

TEST_F(RolloutTest, UnknownRolloutIsNotFound) {
  EXPECT_EQ(NewRollout(SampleRollout()), 1u);
  EXPECT_EQ(store_->GetRollout(2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetRollout(0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListRolloutNodes(2).status().code(), absl::StatusCode::kNotFound);
  const RolloutRecord rollout = SampleRollout();
  const Status write = store_->WriteRollout(2, &rollout, Nodes{SampleNode("a")});
  EXPECT_EQ(write.code(), absl::StatusCode::kNotFound) << write;
  EXPECT_THAT(std::string(write.message()), HasSubstr("rollout 2"));
  EXPECT_EQ(store_->ListRollouts()->size(), 1u);
  EXPECT_EQ(store_->ListRolloutNodes(1)->size(), 0u);  // nothing leaked into rollout 1
}

TEST_F(RolloutTest, BadArgumentsAreInvalidArgumentNamingTheFieldOrNodeAndWriteNothing) {
  const uint64_t id = NewRollout(SampleRollout());
  const Nodes before = {SampleNode("a")};
  ASSERT_TRUE(store_->WriteRollout(id, nullptr, before).ok());

  RolloutRecord bad = SampleRollout();
  bad.stage = 2;
  ExpectInvalid(store_->WriteRollout(id, &bad, {}), "stage is 2, not an index into 2 stages");
  bad = SampleRollout();
  bad.stages[0].percent = 50;
  ExpectInvalid(store_->WriteRollout(id, &bad, {}), "stages[0] has both nodes and percent");
  bad = SampleRollout();
  bad.min_ack_share = 0;
  ExpectInvalid(store_->WriteRollout(id, &bad, {}), "min_ack_share is 0");
  bad = SampleRollout();
  bad.stage_timeout_ms = 0;
  ExpectInvalid(store_->WriteRollout(id, &bad, {}), "stage_timeout_ms is 0");
  bad = SampleRollout();
  bad.pause_reason = std::string("cut \xe2\x82", 6);  // half of a euro sign
  ExpectInvalid(store_->WriteRollout(id, &bad, {}), "pause_reason is not valid UTF-8");

  const RolloutRecord good = SampleRollout();
  ExpectInvalid(store_->WriteRollout(id, &good, Nodes{SampleNode("")}), "node id is empty");
  const std::string long_id = "node-" + std::string(252, 'z');  // 257 bytes
  ExpectInvalid(store_->WriteRollout(id, &good, Nodes{SampleNode("b"), SampleNode(long_id)}),
                "'node-zzz");
  ExpectInvalid(
      store_->WriteRollout(id, &good, Nodes{SampleNode("b"), SampleNode("c"), SampleNode("b")}),
      "node 'b' is listed twice");
  RolloutNodeRecord bad_error = SampleNode("b", NodeMapState::kFailed);
  bad_error.error = "\xff";
  ExpectInvalid(store_->WriteRollout(id, &good, Nodes{bad_error}),
                "node 'b': error is not valid UTF-8");
  EXPECT_EQ(Get(id), WithId(SampleRollout(), id));
  EXPECT_EQ(ListNodes(id), before);

  // 256 bytes is the longest node id.
  const std::string longest(256, 'n');
  ASSERT_TRUE(store_->WriteRollout(id, nullptr, Nodes{SampleNode(longest)}).ok());
  EXPECT_EQ(ListNodes(id).back().node_id, longest);
}

TEST_F(RolloutTest, ValuesOverTheLimitAreInvalidArgumentAndWriteNothing) {
  options_.max_value_bytes = 600;
  Reopen();
  RolloutRecord large = SampleRollout();
  large.pause_reason = std::string(600, 'p');
  ExpectInvalid(store_->CreateRollout(large).status(), "rollouts");
  const uint64_t id = NewRollout(SampleRollout());
  EXPECT_EQ(id, 1u);
  // Only the last node is too large, and nothing of the call is written.
  RolloutNodeRecord too_large = SampleNode("b", NodeMapState::kFailed);
  too_large.error = std::string(600, 'x');
  RolloutRecord advanced = SampleRollout();
  advanced.stage = 1;
  ExpectInvalid(store_->WriteRollout(id, &advanced, Nodes{SampleNode("a"), too_large}),
                "column family 'rollout_nodes', key rollout=1 node='b'");
  EXPECT_EQ(Get(id), WithId(SampleRollout(), id));
  EXPECT_TRUE(ListNodes(id).empty());
}

TEST_F(RolloutTest, EverythingSurvivesAReopen) {
  const uint64_t first = NewRollout(SampleRollout("first"));
  const uint64_t second = NewRollout(SampleRollout("second"));
  RolloutRecord succeeded = SampleRollout("first");
  succeeded.state = RolloutState::kSucceeded;
  ASSERT_TRUE(
      store_->WriteRollout(first, &succeeded, Nodes{SampleNode("n1", NodeMapState::kApplied)})
          .ok());
  ASSERT_TRUE(store_->WriteRollout(second, nullptr, Nodes{SampleNode("n2")}, /*sync=*/false).ok());
  Reopen();
  EXPECT_EQ(Get(first), WithId(succeeded, first));
  EXPECT_EQ(Get(second), WithId(SampleRollout("second"), second));
  EXPECT_EQ(ListNodes(first), (Nodes{SampleNode("n1", NodeMapState::kApplied)}));
  EXPECT_EQ(ListNodes(second), (Nodes{SampleNode("n2")}));
  EXPECT_EQ(NewRollout(SampleRollout("third")), 3u);  // the id counter is durable too
}

// With sync_writes, a WriteRollout with sync survives a power cut; one without is lost whole
// (record and nodes together), even though the store syncs every other write.
TEST(RolloutPowerLossTest, OnlyTheUnsyncedWriteIsLostAtAPowerCut) {
  TempDir dir;
  const StoreOptions options{.sync_writes = true};
  auto fs = std::make_shared<PowerLossFs>();
  RolloutRecord synced = SampleRollout();
  synced.stage = 1;
  {
    StatusOr<std::unique_ptr<Store>> store =
        OpenRocksStore(dir.db(), options, testing::PowerLossEnv(fs));
    ASSERT_TRUE(store.ok()) << store.status();
    StatusOr<RolloutRecord> created = (*store)->CreateRollout(SampleRollout());
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(
        (*store)->WriteRollout(created->id, &synced, Nodes{SampleNode("a")}, /*sync=*/true).ok());
    RolloutRecord unsynced = synced;
    unsynced.state = RolloutState::kSucceeded;
    ASSERT_TRUE((*store)
                    ->WriteRollout(created->id, &unsynced, Nodes{SampleNode("b")}, /*sync=*/false)
                    .ok());
    EXPECT_EQ((*store)->ListRolloutNodes(created->id)->size(), 2u);
    fs->CutAfter(0);
  }
  fs->DropUnsynced();
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->GetRollout(1), WithId(synced, 1));
  EXPECT_EQ(*(*store)->ListRolloutNodes(1), (Nodes{SampleNode("a")}));
}

}  // namespace
}  // namespace ripplekv::store
