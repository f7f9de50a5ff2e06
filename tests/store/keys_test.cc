#include "store/keys.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ripplekv::store {
namespace {

TEST(StoreKeysTest, TaskKeysSortInCanonicalOrderAcrossByteBoundaries) {
  // Little-endian or decimal text would put 256 before 255 or 10 before 9.
  std::vector<TaskKey> keys = {
      {.job = 2, .sample = 0, .layer = 0},       {.job = 1, .sample = 256, .layer = 0},
      {.job = 1, .sample = 255, .layer = 70000}, {.job = 1, .sample = 0, .layer = 256},
      {.job = 1, .sample = 0, .layer = 9},       {.job = 1, .sample = 0, .layer = 10},
      {.job = 256, .sample = 0, .layer = 0},
  };
  std::vector<std::string> bytes;
  for (const TaskKey& k : keys) bytes.push_back(TaskKeyBytes(k));
  std::sort(keys.begin(), keys.end());
  std::sort(bytes.begin(), bytes.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(ParseTaskKey(bytes[i]), keys[i]) << "position " << i;
  }
}

TEST(StoreKeysTest, ResultKeysRoundTripAndExtendTheirTaskKey) {
  const TrialResult r{.job = 0x0102030405060708, .sample = 0xA0B0C0D0, .layer = 7, .trial = 513};
  const std::string key = ResultKeyBytes(r);
  ASSERT_EQ(key.size(), 20u);
  EXPECT_EQ(key.substr(0, 16), TaskKeyBytes({.job = r.job, .sample = r.sample, .layer = r.layer}));
  EXPECT_EQ(key.substr(0, 8), JobKey(r.job));
  const std::optional<TrialResult> parsed = ParseResultKey(key);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, r);
  EXPECT_FALSE(ParseResultKey(key.substr(1)).has_value());
  EXPECT_FALSE(ParseTaskKey(key).has_value());
  EXPECT_FALSE(ParseJobKey("1234567").has_value());
}

TEST(StoreKeysTest, VersionKeysOrderByHashThenNumericVersion) {
  std::vector<std::string> keys = {VersionKey("ab", 256), VersionKey("abc", 1), VersionKey("ab", 2),
                                   VersionKey("b", 1), VersionKey("ab", 10)};
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<std::string, uint32_t>> order;
  for (const std::string& k : keys) {
    auto parts = ParseVersionKey(k);
    ASSERT_TRUE(parts.has_value());
    order.emplace_back(parts->model_hash, parts->version);
  }
  const std::vector<std::pair<std::string, uint32_t>> expected = {
      {"ab", 2}, {"ab", 10}, {"ab", 256}, {"abc", 1}, {"b", 1}};
  EXPECT_EQ(order, expected);
  // "ab"'s prefix does not capture "abc"'s versions.
  EXPECT_NE(VersionKey("abc", 1).rfind(VersionPrefix("ab"), 0), 0u);
}

TEST(StoreKeysTest, ModelHashMustBeNonEmptyBoundedAndNulFree) {
  EXPECT_TRUE(ValidateModelHash("deadbeef").ok());
  EXPECT_EQ(ValidateModelHash("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateModelHash(std::string(kMaxModelHashBytes + 1, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  const Status nul = ValidateModelHash(std::string("ab\0cd", 5));
  EXPECT_EQ(nul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nul.message().find("offset 2"), absl::string_view::npos) << nul;
}

TEST(StoreKeysTest, DescribeKeyNamesFieldsOrFallsBackToHex) {
  EXPECT_EQ(
      DescribeKey(kResultsCf, ResultKeyBytes({.job = 3, .sample = 1, .layer = 2, .trial = 0})),
      "column family 'results', key job=3 sample=1 layer=2 trial=0");
  EXPECT_EQ(DescribeKey(kProfilesCf, VersionKey("ab", 4)),
            "column family 'profiles', key model_hash=ab version=4");
  EXPECT_EQ(DescribeKey(kTasksCf, std::string("\x01\xff", 2)), "column family 'tasks', key 0x01ff");
  EXPECT_EQ(DescribeKey(kMetaCf, "next_job_id"), "column family 'meta', key 'next_job_id'");
  EXPECT_EQ(DescribeKey(kJobsCf, V1JobDataKey(12)), "column family 'jobs', key job=12 data");
  EXPECT_EQ(ParseV1JobDataKey(V1JobDataKey(12)), 12u);
  EXPECT_FALSE(ParseJobKey(V1JobDataKey(12)).has_value());
  EXPECT_EQ(DescribeKey(kJobDataCf, JobKey(12)), "column family 'job_data', key job=12");
  EXPECT_EQ(DescribeKey(kRolloutsCf, RolloutKey(5)), "column family 'rollouts', key rollout=5");
  EXPECT_EQ(DescribeKey(kRolloutNodesCf, RolloutNodeKey(5, "node-a")),
            "column family 'rollout_nodes', key rollout=5 node='node-a'");
  EXPECT_EQ(DescribeKey(kRolloutNodesCf, RolloutNodeKey(5, std::string("\x01\xfe", 2))),
            "column family 'rollout_nodes', key rollout=5 node=0x01fe");
  EXPECT_EQ(DescribeKey(kRolloutsCf, RolloutKey(0)),
            "column family 'rollouts', key 0x0000000000000000");  // ids start at 1
  EXPECT_EQ(DescribeKey(kMetaCf, MapDigestKey("ab", "0123456789abcdef")),
            "column family 'meta', key 'map_digest/' model_hash=ab digest=0123456789abcdef");
}

TEST(StoreKeysTest, RolloutNodeKeysGroupByRolloutThenOrderByNodeId) {
  std::vector<std::string> keys = {RolloutNodeKey(256, "a"), RolloutNodeKey(1, "b"),
                                   RolloutNodeKey(2, "a"), RolloutNodeKey(1, "a"),
                                   RolloutNodeKey(1, "ab")};
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const std::string& k : keys) {
    auto parts = ParseRolloutNodeKey(k);
    ASSERT_TRUE(parts.has_value());
    order.emplace_back(parts->id, parts->node_id);
  }
  const std::vector<std::pair<uint64_t, std::string>> expected = {
      {1, "a"}, {1, "ab"}, {1, "b"}, {2, "a"}, {256, "a"}};
  EXPECT_EQ(order, expected);
  EXPECT_EQ(RolloutNodeKey(7, "x").substr(0, 8), RolloutKey(7));
  EXPECT_FALSE(ParseRolloutNodeKey(RolloutKey(7)).has_value());  // no node id
  EXPECT_FALSE(ParseRolloutNodeKey(RolloutNodeKey(7, std::string(kMaxNodeIdBytes + 1, 'n'))));
  EXPECT_TRUE(ParseRolloutNodeKey(RolloutNodeKey(7, std::string(kMaxNodeIdBytes, 'n'))));
  EXPECT_EQ(ParseRolloutKey(RolloutKey(0x0102030405060708)), 0x0102030405060708u);
}

TEST(StoreKeysTest, MapDigestKeysRoundTripAndRejectMalformedDigests) {
  const auto parts = ParseMapDigestKey(MapDigestKey("ab", "0123456789abcdef"));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->model_hash, "ab");
  EXPECT_EQ(parts->digest, "0123456789abcdef");
  EXPECT_FALSE(ParseMapDigestKey(MapDigestKey("ab", "0123456789ABCDEF")).has_value());
  EXPECT_FALSE(ParseMapDigestKey(MapDigestKey("ab", "0123456789abcde")).has_value());
  EXPECT_FALSE(ParseMapDigestKey(MapDigestKey("", "0123456789abcdef")).has_value());
  EXPECT_EQ(ParseMapDigestValue(MapDigestValue(70000)), 70000u);
  EXPECT_FALSE(ParseMapDigestValue("abc").has_value());
  EXPECT_FALSE(ParseMapDigestValue(MapDigestValue(0)).has_value());
}

TEST(StoreKeysTest, NodeIdsAreOneTo256BytesAndShownReadably) {
  EXPECT_TRUE(ValidateNodeId("n").ok());
  EXPECT_TRUE(ValidateNodeId(std::string(kMaxNodeIdBytes, 'n')).ok());
  EXPECT_EQ(ValidateNodeId("").code(), absl::StatusCode::kInvalidArgument);
  const Status long_id = ValidateNodeId(std::string(kMaxNodeIdBytes + 1, 'n'));
  EXPECT_EQ(long_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_id.message(),
            "node id '" + std::string(64, 'n') + "'... is 257 bytes; at most 256 allowed");
  EXPECT_EQ(ShowNodeId("node-1"), "'node-1'");
  EXPECT_EQ(ShowNodeId(std::string("a\0b", 3)), "0x610062");
}

}  // namespace
}  // namespace ripplekv::store
