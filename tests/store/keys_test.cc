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
}

}  // namespace
}  // namespace ripplekv::store
