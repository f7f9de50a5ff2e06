// The generators' PRNG: SplitMix64's published reference outputs, and the bounded draws.

#include "base/rng.h"

#include <set>

#include "gtest/gtest.h"

namespace ripplekv::base {
namespace {

TEST(SplitMix64Test, MatchesTheReferenceSequence) {
  // splitmix64.c (Vigna) seeded with 1234567.
  SplitMix64 rng(1234567);
  EXPECT_EQ(rng.Next(), 6457827717110365317ull);
  EXPECT_EQ(rng.Next(), 3203168211198807973ull);
  EXPECT_EQ(rng.Next(), 9817491932198370423ull);
  EXPECT_EQ(rng.Next(), 4593380528125082431ull);
  EXPECT_EQ(rng.Next(), 16408922859458223821ull);
}

TEST(SplitMix64Test, BoundedDrawsStayInRangeAndCoverIt) {
  SplitMix64 rng(5);
  std::set<uint64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t x = rng.Below(7);
    ASSERT_LT(x, 7u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 7u);
  for (int i = 0; i < 100; ++i) {
    const int64_t y = rng.Between(-3, 3);
    ASSERT_GE(y, -3);
    ASSERT_LE(y, 3);
  }
  EXPECT_EQ(rng.Below(1), 0u);
}

TEST(SplitMix64Test, StreamSeedsDifferPerStream) {
  EXPECT_NE(StreamSeed(1, 2, 3), StreamSeed(1, 2, 4));
  EXPECT_NE(StreamSeed(1, 2, 3), StreamSeed(1, 3, 3));
  EXPECT_NE(StreamSeed(1, 2, 3), StreamSeed(2, 2, 3));
  EXPECT_EQ(StreamSeed(1, 2, 3), StreamSeed(1, 2, 3));
}

}  // namespace
}  // namespace ripplekv::base
