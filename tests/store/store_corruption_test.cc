// Damaged databases: every undecodable record is DataLoss naming its column family and key, and
// a database of another schema or another program is refused.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/keys.h"
#include "store/store.h"
#include "tests/store/rollout_samples.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::PutRaw;
using ::ripplekv::store::testing::SampleNode;
using ::ripplekv::store::testing::SampleRollout;
using ::ripplekv::store::testing::TempDir;
using ::testing::HasSubstr;

const StoreOptions kOptions{.sync_writes = false};

// Creates job 1 (1 sample x 2 layers, 2 trials) with task (0, 0) done; closes the store.
void SeedDatabase(const std::string& path, bool cancel = false) {
  StatusOr<std::unique_ptr<Store>> store = OpenStore(path, kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<PlannedTask> tasks = {{.sample = 0, .layer = 0}, {.sample = 0, .layer = 1}};
  ASSERT_TRUE((*store)->CreateJob(MakeSpec(), tasks).ok());
  const TaskKey key{.job = 1, .sample = 0, .layer = 0};
  ASSERT_TRUE((*store)->LeaseTask(key, "w", 1000).ok());
  ASSERT_TRUE((*store)
                  ->CompleteTask(key, std::vector<TrialResult>{{.job = 1, .trial = 0, .kl = 0.5},
                                                               {.job = 1, .trial = 1, .kl = 0.25}})
                  .ok());
  if (cancel) {
    ASSERT_TRUE((*store)->UpdateJobState(1, JobState::kCancelled).ok());
  }
}

TEST(StoreCorruptionTest, DamagedResultIsDataLossNamingItsKey) {
  TempDir dir;
  SeedDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kResultsCf,
                     ResultKeyBytes({.job = 1, .sample = 0, .layer = 0, .trial = 1}), "{\"v\":1,"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();  // results are not read when opening
  const Status listed = (*store)->ListResults(1).status();
  EXPECT_EQ(listed.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(listed.message()),
              HasSubstr("column family 'results', key job=1 sample=0 layer=0 trial=1"));
  EXPECT_THAT(std::string(listed.message()), HasSubstr("not valid JSON"));
  const TaskKey key{.job = 1, .sample = 0, .layer = 0};
  EXPECT_EQ((*store)->CompleteTask(key, {}).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*store)->ListTaskResults(key).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*store)->CountResults(1).status().code(), absl::StatusCode::kOk);  // keys only
}

TEST(StoreCorruptionTest, DamagedJobMakesOpenDataLossNamingTheKey) {
  TempDir dir;
  SeedDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, JobKey(1), R"({"v":1,"state":"running"})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("column family 'jobs', key job=1"));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("field 'spec' is missing"));
}

TEST(StoreCorruptionTest, DamagedTaskOfAFinishedJobIsDataLossWhenRead) {
  TempDir dir;
  SeedDatabase(dir.db(), /*cancel=*/true);
  ASSERT_TRUE(PutRaw(dir.db(), kTasksCf, TaskKeyBytes({.job = 1, .sample = 0, .layer = 1}),
                     R"({"v":1,"state":"pending","lease_owner":"","lease_deadline_ms":0})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();  // recovery skips finished jobs
  const Status s = (*store)->GetTask({.job = 1, .sample = 0, .layer = 1}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'tasks', key job=1 sample=0 layer=1: field 'attempts' is "
                        "missing"));
  EXPECT_EQ((*store)->ListTasks(1).status().code(), absl::StatusCode::kDataLoss);
}

TEST(StoreCorruptionTest, DamagedInlineDataIsDataLossWhenTheJobIsRead) {
  TempDir dir;
  SeedDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kJobDataCf, JobKey(1), R"({"v":1,"data_inline":7})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->GetJob(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'job_data', key job=1: field 'data_inline' is not a "
                        "string"));
}

TEST(StoreCorruptionTest, MalformedKeyIsDataLossShownInHex) {
  TempDir dir;
  SeedDatabase(dir.db());
  // 9 bytes under job 1's prefix: not a 20-byte result key.
  ASSERT_TRUE(PutRaw(dir.db(), kResultsCf, JobKey(1) + "x", R"({"v":1,"kl":1.0})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->ListResults(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'results', key 0x000000000000000178: malformed key"));
}

TEST(StoreCorruptionTest, NewerValueFormatIsDataLoss) {
  TempDir dir;
  SeedDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kProfilesCf, VersionKey("ab", 1),
                     R"({"v":2,"profile_json":"{}","job":0,"created_at_ms":1})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->GetProfile("ab").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'profiles', key model_hash=ab version=1: value format "
                        "version 2"));
}

// Creates rollout 1 with node "n1"; closes the store.
void SeedRollout(const std::string& path) {
  StatusOr<std::unique_ptr<Store>> store = OpenStore(path, kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateRollout(SampleRollout()).ok());
  const std::vector<RolloutNodeRecord> nodes = {SampleNode("n1")};
  ASSERT_TRUE((*store)->WriteRollout(1, nullptr, nodes).ok());
}

TEST(StoreCorruptionTest, DamagedRolloutValueIsDataLossNamingItsKey) {
  TempDir dir;
  SeedRollout(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutsCf, RolloutKey(1), ""));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();  // rollouts are not read when opening
  const RolloutRecord rollout = SampleRollout();
  for (const Status& s :
       {(*store)->GetRollout(1).status(), (*store)->ListRollouts().status(),
        (*store)->ListRolloutNodes(1).status(), (*store)->WriteRollout(1, &rollout, {})}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("column family 'rollouts', key rollout=1: value is empty"));
  }
}

TEST(StoreCorruptionTest, DamagedRolloutNodeIsDataLossNamingItsKey) {
  TempDir dir;
  SeedRollout(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutNodesCf, RolloutNodeKey(1, "n2"), ""));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->ListRolloutNodes(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'rollout_nodes', key rollout=1 node='n2': value is empty"));
  EXPECT_TRUE((*store)->GetRollout(1).ok());  // the rollout's own record is intact
}

TEST(StoreCorruptionTest, UndecodableRolloutIsDataLossNamingKeyAndField) {
  TempDir dir;
  SeedRollout(dir.db());
  ASSERT_TRUE(
      PutRaw(dir.db(), kRolloutsCf, RolloutKey(1),
             R"({"v":1,"model_hash":"ab","map_version":"0123456789abcdef","previous_version":"",)"
             R"("stages":[{"percent":100}],"soak_ms":0,"stage_timeout_ms":1,"min_ack_share":1,)"
             R"("state":"resting","stage":0,"pause_reason":"","created_at_ms":0,"updated_at_ms":0,)"
             R"("stage_started_at_ms":0})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  for (const Status& s : {(*store)->GetRollout(1).status(), (*store)->ListRollouts().status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("column family 'rollouts', key rollout=1: field 'state' has an unknown "
                          "value 'resting'"));
  }
}

TEST(StoreCorruptionTest, UndecodableRolloutNodeIsDataLossNamingKeyAndField) {
  TempDir dir;
  SeedRollout(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutNodesCf, RolloutNodeKey(1, "n1"),
                     R"({"v":1,"in_rollout":true,"assigned_version":"","held_version":"",)"
                     R"("state":"pending","error":"","updated_at_ms":0,"connected":true})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->ListRolloutNodes(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'rollout_nodes', key rollout=1 node='n1': field "
                        "'connected' is not a known field"));
}

TEST(StoreCorruptionTest, MalformedRolloutKeysAreDataLossShownInHex) {
  TempDir dir;
  SeedRollout(dir.db());
  // Rollout 1's prefix with no node id; a 9-byte rollout key.
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutNodesCf, RolloutKey(1), "x"));
  ASSERT_TRUE(PutRaw(dir.db(), kRolloutsCf, RolloutKey(2) + "x", "v"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status nodes = (*store)->ListRolloutNodes(1).status();
  EXPECT_EQ(nodes.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(nodes.message()),
              HasSubstr("column family 'rollout_nodes', key 0x0000000000000001: malformed key"));
  const Status listed = (*store)->ListRollouts().status();
  EXPECT_EQ(listed.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(listed.message()),
              HasSubstr("column family 'rollouts', key 0x000000000000000278: malformed key"));
}

TEST(StoreCorruptionTest, BudgetMapWhoseBytesDoNotMatchItsDigestIsDataLoss) {
  TempDir dir;
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutProfileVersion("ab", "{}").ok());
    ASSERT_TRUE((*store)->PutBudgetMap("ab", 1, "{}").ok());
  }
  // The digest of "{}" over other bytes.
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 1),
                     R"({"v":1,"profile_version":1,"budget_json":"[]",)"
                     R"("digest":"44136fa355b3678a","created_at_ms":1})"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  for (const Status& s : {(*store)->GetBudgetMap("ab").status(),
                          (*store)->GetBudgetMapByDigest("ab", "44136fa355b3678a").status(),
                          (*store)->PutBudgetMap("ab", 1, "{}").status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("column family 'budget_maps', key model_hash=ab version=1: field "
                          "'digest' is '44136fa355b3678a'"));
  }
}

TEST(StoreCorruptionTest, DigestIndexNamingAMissingMapIsDataLoss) {
  TempDir dir;
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutProfileVersion("ab", "{}").ok());
  }
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, MapDigestKey("ab", "44136fa355b3678a"), MapDigestValue(7)));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  ASSERT_TRUE(store.ok()) << store.status();
  const Status s = (*store)->PutBudgetMap("ab", 1, "{}").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("column family 'meta', key 'map_digest/' model_hash=ab "
                        "digest=44136fa355b3678a: names missing budget map version 7"));
  EXPECT_TRUE((*store)->ListBudgetMaps()->empty());
}

TEST(StoreCorruptionTest, AnotherSchemaVersionIsFailedPrecondition) {
  TempDir dir;
  SeedDatabase(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, kSchemaVersionKey, "5"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("schema version '5'"));
}

TEST(StoreCorruptionTest, ForeignRocksDbIsRefusedUntouched) {
  TempDir dir;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.db(), &db).ok());
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "users", &cf).ok());
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(cf).ok());
    delete db;
  }
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), kOptions);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("not a RippleKV store"));
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.db(), &families).ok());
  EXPECT_EQ(families.size(), 2u);  // default + users: nothing added
}

}  // namespace
}  // namespace ripplekv::store
