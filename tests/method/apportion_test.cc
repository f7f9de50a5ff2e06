// The one apportioning routine (method/apportion.h): hand-worked water-filling and rounding cases,
// the tie rule, zero weights, and the invariants every allocator relies on (exact total, bounds,
// budgets never ordered against weights).

#include "method/apportion.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> Ok(std::vector<double> w, int64_t total, ApportionBounds bounds = {},
                        std::vector<double> priority = {}) {
  auto out = Apportion(w, total, bounds, priority);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<int64_t>{};
}

TEST(ApportionTest, ProportionalSharesThatAreIntegersComeOutExactly) {
  EXPECT_THAT(Ok({1, 2, 3, 4}, 20), ElementsAre(2, 4, 6, 8));
  // Integer targets summing to the total are returned unchanged (a budget map read back).
  EXPECT_THAT(Ok({40, 17, 3, 99}, 159, {.min_tokens = 3, .max_tokens = 99}),
              ElementsAre(40, 17, 3, 99));
}

TEST(ApportionTest, EqualRemaindersGoToTheHigherPriorityThenTheLowerLayer) {
  // 10 / 3 = 3.33 each: one extra token, all remainders equal.
  EXPECT_THAT(Ok({1, 1, 1}, 10), ElementsAre(4, 3, 3));
  EXPECT_THAT(Ok({1, 1, 1}, 10, {}, {0, 0, 5}), ElementsAre(3, 3, 4));
  EXPECT_THAT(Ok({1, 1, 1}, 11, {}, {0, 2, 1}), ElementsAre(3, 4, 4));
}

TEST(ApportionTest, UpperBoundIsWaterFilled) {
  // 3, 3, 24 -> layer 2 fixed at 12; the other 18 split 9 / 9.
  EXPECT_THAT(Ok({1, 1, 8}, 30, {.min_tokens = 0, .max_tokens = 12}), ElementsAre(9, 9, 12));
}

TEST(ApportionTest, LowerBoundIsWaterFilled) {
  // 2, 20, 20 -> layer 0 raised to 6; the other 36 split 18 / 18.
  EXPECT_THAT(Ok({1, 10, 10}, 42, {.min_tokens = 6}), ElementsAre(6, 18, 18));
}

TEST(ApportionTest, ZeroWeightsShareWhatPositiveWeightsCannotTake) {
  EXPECT_THAT(Ok({0, 0}, 7), ElementsAre(4, 3));  // all zero: equal shares
  EXPECT_THAT(Ok({0, 1}, 5), ElementsAre(0, 5));
  // Layer 1 is capped at 6; the 4 left go to the zero-weight layer.
  EXPECT_THAT(Ok({0, 1}, 10, {.min_tokens = 0, .max_tokens = 6}), ElementsAre(4, 6));
}

TEST(ApportionTest, HugeWeightsDoNotOverflow) {
  EXPECT_THAT(Ok({1.0, 1e300, 1e308}, 1000, {.min_tokens = 1}), ElementsAre(1, 1, 998));
}

TEST(ApportionTest, BadInputIsInvalidArgumentNamingIt) {
  auto infeasible = Apportion(std::vector<double>{1, 1}, 10, {.min_tokens = 6});
  EXPECT_EQ(infeasible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(infeasible.status().message()), HasSubstr("outside [12"));
  auto above = Apportion(std::vector<double>{1, 1}, 10, {.min_tokens = 0, .max_tokens = 4});
  EXPECT_THAT(std::string(above.status().message()), HasSubstr("outside [0, 8]"));
  auto negative = Apportion(std::vector<double>{1, -2}, 10, {});
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("weight of layer 1"));
  auto nan = Apportion(std::vector<double>{1, 1}, 10, {}, std::vector<double>{0, NAN});
  EXPECT_THAT(std::string(nan.status().message()), HasSubstr("priority of layer 1"));
  auto length = Apportion(std::vector<double>{1, 1}, 10, {}, std::vector<double>{1});
  EXPECT_THAT(std::string(length.status().message()), HasSubstr("1 priorities for 2 layers"));
  EXPECT_FALSE(Apportion(std::vector<double>{}, 10, {}).ok());
  EXPECT_FALSE(Apportion(std::vector<double>{1}, 10, {.min_tokens = 5, .max_tokens = 4}).ok());
  EXPECT_FALSE(Apportion(std::vector<double>{1}, kMaxApportionTotal + 1, {}).ok());
}

TEST(ApportionTest, RandomInputsKeepTheTotalTheBoundsAndTheOrderOfWeights) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 2000; ++iter) {
    const int L = 1 + static_cast<int>(rng() % 40);
    std::vector<double> w(L);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (double& v : w) v = (rng() % 8 == 0) ? 0.0 : std::pow(16.0, u(rng));
    const int64_t lo = static_cast<int64_t>(rng() % 50);
    const int64_t hi = lo + static_cast<int64_t>(rng() % 300);
    const int64_t total = L * lo + static_cast<int64_t>(rng() % (L * (hi - lo) + 1));
    auto b = Apportion(w, total, {.min_tokens = lo, .max_tokens = hi});
    ASSERT_TRUE(b.ok()) << b.status();
    int64_t sum = 0;
    for (int l = 0; l < L; ++l) {
      sum += (*b)[l];
      ASSERT_GE((*b)[l], lo);
      ASSERT_LE((*b)[l], hi);
      for (int k = 0; k < L; ++k) {
        if (w[l] > w[k]) ASSERT_GE((*b)[l], (*b)[k]) << "layers " << l << ", " << k;
      }
    }
    ASSERT_EQ(sum, total);
  }
}

}  // namespace
}  // namespace ripplekv::method
