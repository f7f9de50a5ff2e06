#include "worker/engine/kv_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace ripplekv::worker {
namespace {

ModelConfig SmallConfig() {
  ModelConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 3;
  return c;
}

// Rows [n, heads, head_dim] whose value encodes (token, head, dim).
std::vector<float> Rows(int n, int first_token) {
  std::vector<float> r;
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 3; ++e) r.push_back(100.0f * (first_token + i) + 10.0f * h + e);
  return r;
}

TEST(KvCacheTest, AppendStoresPerHeadRowsAndPositions) {
  KvCache cache(SmallConfig(), 8);
  const auto rows = Rows(3, 0);
  const std::vector<int32_t> pos = {0, 1, 5};
  ASSERT_TRUE(cache.Append(1, rows, rows, pos).ok());
  EXPECT_EQ(cache.length(1), 3);
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.Value(1, 1, 2)[0], 210.0f);
  EXPECT_EQ(cache.Key(1, 0, 1)[2], 102.0f);
  EXPECT_EQ(cache.Position(1, 1, 2), 5);
}

TEST(KvCacheTest, RetainKeepsChosenEntriesAndTheirOriginalPositions) {
  KvCache cache(SmallConfig(), 8);
  const auto rows = Rows(5, 0);
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4};
  ASSERT_TRUE(cache.Append(0, rows, rows, pos).ok());
  const std::vector<std::vector<int32_t>> keep = {{0, 3}, {2, 4}};
  ASSERT_TRUE(cache.Retain(0, keep).ok());
  EXPECT_EQ(cache.length(0), 2);
  EXPECT_EQ(cache.Position(0, 0, 1), 3);
  EXPECT_EQ(cache.Position(0, 1, 0), 2);
  EXPECT_EQ(cache.Value(0, 1, 1)[0], 410.0f);
  // New tokens continue after the true last position, not after the kept count.
  const auto more = Rows(1, 5);
  const std::vector<int32_t> next = {5};
  ASSERT_TRUE(cache.Append(0, more, more, next).ok());
  EXPECT_EQ(cache.Position(0, 0, 2), 5);
}

TEST(KvCacheTest, RetainRejectsUnequalCountsAndUnsortedIndices) {
  KvCache cache(SmallConfig(), 8);
  const auto rows = Rows(4, 0);
  const std::vector<int32_t> pos = {0, 1, 2, 3};
  ASSERT_TRUE(cache.Append(0, rows, rows, pos).ok());
  const std::vector<std::vector<int32_t>> unequal = {{0, 1}, {2}};
  EXPECT_EQ(cache.Retain(0, unequal).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::vector<int32_t>> unsorted = {{1, 0}, {2, 3}};
  EXPECT_EQ(cache.Retain(0, unsorted).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::vector<int32_t>> out_of_range = {{0, 4}, {2, 3}};
  EXPECT_EQ(cache.Retain(0, out_of_range).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.length(0), 4) << "a rejected Retain changes nothing";
}

TEST(KvCacheTest, AppendRejectsOverflowAndNonIncreasingPositions) {
  KvCache cache(SmallConfig(), 2);
  const auto rows = Rows(3, 0);
  const std::vector<int32_t> pos3 = {0, 1, 2};
  EXPECT_EQ(cache.Append(0, rows, rows, pos3).code(), absl::StatusCode::kResourceExhausted);
  const auto one = Rows(1, 0);
  const std::vector<int32_t> p4 = {4}, p3 = {3};
  ASSERT_TRUE(cache.Append(0, one, one, p4).ok());
  EXPECT_EQ(cache.Append(0, one, one, p3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvCacheTest, TruncateFromRewindsEveryLayer) {
  KvCache cache(SmallConfig(), 8);
  const auto rows = Rows(4, 0);
  const std::vector<int32_t> pos = {0, 1, 2, 3};
  for (int l = 0; l < 2; ++l) ASSERT_TRUE(cache.Append(l, rows, rows, pos).ok());
  cache.TruncateFrom(2);
  EXPECT_EQ(cache.length(0), 2);
  EXPECT_EQ(cache.length(1), 2);
}

}  // namespace
}  // namespace ripplekv::worker
