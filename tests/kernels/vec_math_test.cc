#include "kernels/ops/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ripplekv::kernels::cpu {
namespace {

TEST(VecMathTest, ExpFIsWithinTwoParts10MillionOfStdExp) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.00137f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ExpF(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2e-7);
}

TEST(VecMathTest, ExpFIsExactAtZeroAndSaturatesAtTheEnds) {
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_EQ(ExpF(-100.0f), 0.0f);
  EXPECT_EQ(ExpF(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isfinite(ExpF(1000.0f)));
}

}  // namespace
}  // namespace ripplekv::kernels::cpu
