#include "method/resampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

TEST(AverageRanksTest, TiesShareTheMeanOfTheirRanks) {
  const std::vector<double> v = {3.0, 1.0, 3.0, 2.0, 3.0};
  double ties = -1.0;
  // Sorted: 1 (rank 1), 2 (rank 2), 3, 3, 3 (ranks 3, 4, 5 -> 4 each).
  EXPECT_EQ(AverageRanks(v, &ties), (std::vector<double>{4.0, 1.0, 4.0, 2.0, 4.0}));
  EXPECT_EQ(ties, 27.0 - 3.0);  // one group of t = 3
  EXPECT_EQ(AverageRanks(std::vector<double>{0.5, -1.0}), (std::vector<double>{2.0, 1.0}));
}

TEST(SpearmanTest, HandComputedValues) {
  const std::vector<double> x = {1.0, 2.0, 3.0, 4.0, 5.0};
  EXPECT_DOUBLE_EQ(SpearmanCorrelation(x, std::vector<double>{10, 20, 30, 40, 50}), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanCorrelation(x, std::vector<double>{5, 4, 3, 2, 1}), -1.0);
  // Ranks of y: 2, 1, 4, 3, 5; d = (-1, 1, -1, 1, 0), sum d^2 = 4: rho = 1 - 6*4 / (5*24) = 0.8.
  EXPECT_NEAR(SpearmanCorrelation(x, std::vector<double>{2, 1, 4, 3, 5}), 0.8, 1e-15);
  // Ties: y ranks 1.5, 1.5, 3, 4, 5. Pearson of (1..5) and those: cov = 9.5/... computed by hand:
  // centered x = (-2,-1,0,1,2), centered y = (-1.5,-1.5,0,1,2): sxy = 3+1.5+0+1+4 = 9.5,
  // sxx = 10, syy = 2.25+2.25+0+1+4 = 9.5; rho = 9.5 / sqrt(95).
  EXPECT_NEAR(SpearmanCorrelation(x, std::vector<double>{7, 7, 8, 9, 10}), 9.5 / std::sqrt(95.0),
              1e-15);
  EXPECT_EQ(SpearmanCorrelation(x, std::vector<double>{1, 1, 1, 1, 1}), 0.0);  // constant
  EXPECT_EQ(SpearmanCorrelation(std::vector<double>{1}, std::vector<double>{2}), 0.0);
}

TEST(PearsonTest, HandComputedValues) {
  const std::vector<double> x = {1.0, 2.0, 3.0, 4.0, 5.0};
  EXPECT_DOUBLE_EQ(PearsonCorrelation(x, std::vector<double>{3, 5, 7, 9, 11}), 1.0);
  EXPECT_DOUBLE_EQ(PearsonCorrelation(x, std::vector<double>{-1, -2, -3, -4, -5}), -1.0);
  // Centered x = (-2,-1,0,1,2), y = (1,0,0,0,4) centered (0,-1,-1,-1,3): sxy = 0+1+0-1+6 = 6,
  // sxx = 10, syy = 0+1+1+1+9 = 12; r = 6 / sqrt(120). Spearman would rank the values instead.
  EXPECT_NEAR(PearsonCorrelation(x, std::vector<double>{1, 0, 0, 0, 4}), 6.0 / std::sqrt(120.0),
              1e-15);
  EXPECT_EQ(PearsonCorrelation(x, std::vector<double>{2, 2, 2, 2, 2}), 0.0);  // constant
  EXPECT_EQ(PearsonCorrelation(std::vector<double>{1}, std::vector<double>{2}), 0.0);
}

TEST(BootstrapDrawTest, DeterministicPerSeedAndUniform) {
  BootstrapDraw a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Index(10);
    EXPECT_EQ(x, b.Index(10));
    differs = differs || x != c.Index(10);
    EXPECT_LT(x, 10u);
  }
  EXPECT_TRUE(differs);
  // 70,000 draws over 7 cells: each count is 10,000 +- 5 sigma (sigma = sqrt(70000/7 * 6/7)).
  BootstrapDraw d(1);
  std::array<int, 7> counts{};
  for (int i = 0; i < 70000; ++i) ++counts[d.Index(7)];
  const double sigma = std::sqrt(10000.0 * 6.0 / 7.0);
  for (int c7 : counts) EXPECT_NEAR(c7, 10000.0, 5.0 * sigma);
  EXPECT_EQ(d.Index(1), 0u);
}

TEST(SortedQuantileTest, Type7Interpolation) {
  const std::vector<double> v = {1.0, 2.0, 4.0, 8.0};
  EXPECT_EQ(SortedQuantile(v, 0.0), 1.0);
  EXPECT_EQ(SortedQuantile(v, 1.0), 8.0);
  EXPECT_DOUBLE_EQ(SortedQuantile(v, 0.5), 3.0);    // h = 1.5: 2 + 0.5 * 2
  EXPECT_DOUBLE_EQ(SortedQuantile(v, 0.25), 1.75);  // h = 0.75: 1 + 0.75 * 1
  EXPECT_EQ(SortedQuantile(std::vector<double>{5.0}, 0.3), 5.0);
}

}  // namespace
}  // namespace ripplekv::method
