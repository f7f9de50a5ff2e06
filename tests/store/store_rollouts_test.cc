// Rollouts: ids, atomic writes of a rollout's value and node records, ordering, argument checks,
// durability across reopen and a power cut (the per-call sync flag).

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/rocks_store.h"
#include "store/store.h"
#include "tests/store/power_loss_fs.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {

// Readable failure messages (found by argument-dependent lookup, so outside the anonymous
// namespace).
void PrintTo(const RolloutRecord& r, std::ostream* os) { *os << r.id << ":'" << r.value << "'"; }
void PrintTo(const RolloutNodeRecord& r, std::ostream* os) {
  *os << "'" << r.node_id << "':'" << r.value << "'";
}

namespace {

using ::ripplekv::store::testing::PowerLossFs;
using ::ripplekv::store::testing::StoreFixture;
using ::ripplekv::store::testing::TempDir;
using ::testing::HasSubstr;

using Nodes = std::vector<RolloutNodeRecord>;

class RolloutTest : public StoreFixture {
 protected:
  uint64_t NewRollout(const std::string& value) {
    StatusOr<RolloutRecord> created = store_->CreateRollout(value);
    EXPECT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created.ok() ? created->value : "", value);
    return created.ok() ? created->id : 0;
  }

  Nodes ListNodes(uint64_t id) {
    StatusOr<Nodes> nodes = store_->ListRolloutNodes(id);
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    return nodes.ok() ? *nodes : Nodes{};
  }

  std::string Value(uint64_t id) {
    StatusOr<RolloutRecord> rollout = store_->GetRollout(id);
    EXPECT_TRUE(rollout.ok()) << rollout.status();
    return rollout.ok() ? rollout->value : "";
  }

  // Asserts InvalidArgument whose message contains `names`.
  void ExpectInvalid(const Status& status, const std::string& names) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(names));
  }
};

TEST_F(RolloutTest, CreateRolloutAllocatesIdsFromOne) {
  EXPECT_TRUE(store_->ListRollouts()->empty());
  EXPECT_EQ(NewRollout("first"), 1u);
  ExpectInvalid(store_->CreateRollout("").status(), "empty");  // uses no id
  EXPECT_EQ(NewRollout("second"), 2u);
  EXPECT_EQ(NewRollout(std::string("\0\xff binary", 9)), 3u);
  EXPECT_EQ(Value(3), std::string("\0\xff binary", 9));  // bytes kept as given
  const std::vector<RolloutRecord> expected = {{.id = 1, .value = "first"},
                                               {.id = 2, .value = "second"},
                                               {.id = 3, .value = std::string("\0\xff binary", 9)}};
  EXPECT_EQ(*store_->ListRollouts(), expected);
  EXPECT_TRUE(ListNodes(1).empty());
}

TEST_F(RolloutTest, WriteRolloutStoresValueAndNodesListedByNodeId) {
  const uint64_t id = NewRollout("v1");
  const uint64_t other = NewRollout("other");
  ASSERT_TRUE(store_
                  ->WriteRollout(id, "v2",
                                 Nodes{{.node_id = "n2", .value = "a"},
                                       {.node_id = "n10", .value = "b"},
                                       {.node_id = "a1", .value = "c"}})
                  .ok());
  EXPECT_EQ(Value(id), "v2");
  const Nodes expected = {{.node_id = "a1", .value = "c"},
                          {.node_id = "n10", .value = "b"},  // bytewise: "n10" < "n2"
                          {.node_id = "n2", .value = "a"}};
  EXPECT_EQ(ListNodes(id), expected);
  EXPECT_TRUE(ListNodes(other).empty());
  EXPECT_EQ(Value(other), "other");
}

TEST_F(RolloutTest, WriteRolloutReplacesNodeRecordsAndKeepsTheValueWhenUnset) {
  const uint64_t id = NewRollout("v1");
  ASSERT_TRUE(store_
                  ->WriteRollout(id, std::nullopt,
                                 Nodes{{.node_id = "a", .value = "pending"},
                                       {.node_id = "b", .value = "pending"}})
                  .ok());
  ASSERT_TRUE(store_
                  ->WriteRollout(id, std::nullopt,
                                 Nodes{{.node_id = "b", .value = "applied"},
                                       {.node_id = "c", .value = "pending"}},
                                 /*sync=*/false)
                  .ok());
  EXPECT_EQ(Value(id), "v1");
  const Nodes expected = {{.node_id = "a", .value = "pending"},
                          {.node_id = "b", .value = "applied"},
                          {.node_id = "c", .value = "pending"}};
  EXPECT_EQ(ListNodes(id), expected);
  ASSERT_TRUE(store_->WriteRollout(id, "v2", {}).ok());  // the value alone
  EXPECT_EQ(Value(id), "v2");
  EXPECT_EQ(ListNodes(id), expected);
}

TEST_F(RolloutTest, UnknownRolloutIsNotFound) {
  EXPECT_EQ(NewRollout("v"), 1u);
  EXPECT_EQ(store_->GetRollout(2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetRollout(0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListRolloutNodes(2).status().code(), absl::StatusCode::kNotFound);
  const Status write = store_->WriteRollout(2, "v", Nodes{{.node_id = "a", .value = "x"}});
  EXPECT_EQ(write.code(), absl::StatusCode::kNotFound) << write;
  EXPECT_THAT(std::string(write.message()), HasSubstr("rollout 2"));
  EXPECT_EQ(store_->ListRollouts()->size(), 1u);
  EXPECT_EQ(store_->ListRolloutNodes(1)->size(), 0u);  // nothing leaked into rollout 1
}

TEST_F(RolloutTest, BadArgumentsAreInvalidArgumentNamingTheNodeAndWriteNothing) {
  const uint64_t id = NewRollout("v1");
  const Nodes before = {{.node_id = "a", .value = "x"}};
  ASSERT_TRUE(store_->WriteRollout(id, std::nullopt, before).ok());

  ExpectInvalid(store_->WriteRollout(id, "", {}), "value is empty");
  ExpectInvalid(store_->WriteRollout(id, "v2", Nodes{{.node_id = "", .value = "x"}}),
                "node id is empty");
  const std::string long_id = "node-" + std::string(252, 'z');  // 257 bytes
  ExpectInvalid(
      store_->WriteRollout(
          id, "v2", Nodes{{.node_id = "b", .value = "y"}, {.node_id = long_id, .value = "x"}}),
      "'node-zzz");
  ExpectInvalid(store_->WriteRollout(id, "v2",
                                     Nodes{{.node_id = "b", .value = "y"},
                                           {.node_id = "c", .value = "y"},
                                           {.node_id = "b", .value = "z"}}),
                "node 'b' is listed twice");
  ExpectInvalid(store_->WriteRollout(id, "v2", Nodes{{.node_id = "b", .value = ""}}),
                "node 'b' is empty");
  EXPECT_EQ(Value(id), "v1");
  EXPECT_EQ(ListNodes(id), before);

  // 256 bytes is the longest node id.
  const std::string longest(256, 'n');
  ASSERT_TRUE(
      store_->WriteRollout(id, std::nullopt, Nodes{{.node_id = longest, .value = "x"}}).ok());
  EXPECT_EQ(ListNodes(id).back().node_id, longest);
}

TEST_F(RolloutTest, ValuesOverTheLimitAreInvalidArgumentAndWriteNothing) {
  options_.max_value_bytes = 16;
  Reopen();
  ExpectInvalid(store_->CreateRollout(std::string(17, 'v')).status(), "rollouts");
  const uint64_t id = NewRollout(std::string(16, 'v'));
  EXPECT_EQ(id, 1u);
  // Only the last node is too large, and nothing of the call is written.
  ExpectInvalid(store_->WriteRollout(id, "v2",
                                     Nodes{{.node_id = "a", .value = "x"},
                                           {.node_id = "b", .value = std::string(17, 'x')}}),
                "column family 'rollout_nodes', key rollout=1 node='b'");
  EXPECT_EQ(Value(id), std::string(16, 'v'));
  EXPECT_TRUE(ListNodes(id).empty());
}

TEST_F(RolloutTest, EverythingSurvivesAReopen) {
  const uint64_t first = NewRollout("r1");
  const uint64_t second = NewRollout("r2");
  ASSERT_TRUE(
      store_->WriteRollout(first, "r1b", Nodes{{.node_id = "n1", .value = "applied"}}).ok());
  ASSERT_TRUE(store_
                  ->WriteRollout(second, std::nullopt, Nodes{{.node_id = "n2", .value = "held"}},
                                 /*sync=*/false)
                  .ok());
  Reopen();
  EXPECT_EQ(Value(first), "r1b");
  EXPECT_EQ(Value(second), "r2");
  EXPECT_EQ(ListNodes(first), (Nodes{{.node_id = "n1", .value = "applied"}}));
  EXPECT_EQ(ListNodes(second), (Nodes{{.node_id = "n2", .value = "held"}}));
  EXPECT_EQ(NewRollout("r3"), 3u);  // the id counter is durable too
}

// With sync_writes, a WriteRollout with sync survives a power cut; one without is lost whole
// (value and nodes together), even though the store syncs every other write.
TEST(RolloutPowerLossTest, OnlyTheUnsyncedWriteIsLostAtAPowerCut) {
  TempDir dir;
  const StoreOptions options{.sync_writes = true};
  auto fs = std::make_shared<PowerLossFs>();
  {
    StatusOr<std::unique_ptr<Store>> store =
        OpenRocksStore(dir.db(), options, testing::PowerLossEnv(fs));
    ASSERT_TRUE(store.ok()) << store.status();
    StatusOr<RolloutRecord> created = (*store)->CreateRollout("v1");
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE((*store)
                    ->WriteRollout(created->id, "v2", Nodes{{.node_id = "a", .value = "synced"}},
                                   /*sync=*/true)
                    .ok());
    ASSERT_TRUE((*store)
                    ->WriteRollout(created->id, "v3", Nodes{{.node_id = "b", .value = "unsynced"}},
                                   /*sync=*/false)
                    .ok());
    EXPECT_EQ((*store)->ListRolloutNodes(created->id)->size(), 2u);
    fs->CutAfter(0);
  }
  fs->DropUnsynced();
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->GetRollout(1)->value, "v2");
  EXPECT_EQ(*(*store)->ListRolloutNodes(1), (Nodes{{.node_id = "a", .value = "synced"}}));
}

}  // namespace
}  // namespace ripplekv::store
