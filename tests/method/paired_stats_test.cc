// Paired statistics (method/paired_stats.h) against values worked out by hand in the comments: the
// exact sign test, the Wilcoxon signed-rank test (exact and normal paths), the seeded bootstrap
// interval, Holm's correction and the effect sizes.

#include "method/paired_stats.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

using ::testing::HasSubstr;

TEST(SignTestTest, FourWinsAndNoLossesIsNotSignificant) {
  // n = 4, X ~ Bin(4, 1/2): P(X <= 0) = 1/16, p = 2/16. 4 wins / 16 ties / 0 losses is not
  // evidence at 0.05, whatever a t-interval on the 20 differences says.
  EXPECT_DOUBLE_EQ(SignTestPValue(4, 0), 0.125);
  EXPECT_DOUBLE_EQ(SignTestPValue(0, 4), 0.125);
}

TEST(SignTestTest, TenWinsTwoLossesMatchesTheBinomialSum) {
  // n = 12: P(X <= 2) = (C(12,0) + C(12,1) + C(12,2)) / 2^12 = (1 + 12 + 66) / 4096 = 79/4096,
  // p = 79/2048 = 0.03857421875 (exact in binary).
  EXPECT_EQ(SignTestPValue(10, 2), 0.03857421875);
  EXPECT_EQ(SignTestPValue(2, 10), 0.03857421875);
}

TEST(SignTestTest, NoDiscordantPairsGivesOne) { EXPECT_EQ(SignTestPValue(0, 0), 1.0); }

TEST(SignTestTest, BalancedOutcomesAreCappedAtOne) {
  // n = 6, m = 3: 2 * (1 + 6 + 15 + 20) / 64 = 84/64 > 1, so p = 1.
  EXPECT_EQ(SignTestPValue(3, 3), 1.0);
}

TEST(SignTestTest, LargeSamplesMatchExactIntegerSums) {
  // Above n = 60 the log-space path runs. References are exact rationals, rounded at the end:
  //   2 * sum_{k=0}^{80} C(200, k) / 2^200        = 0.0056851559967503055
  //   2 * sum_{k=0}^{4850} C(10000, k) / 2^10000  = 0.0027879675177127188
  // (big-integer binomial sums).
  EXPECT_NEAR(SignTestPValue(120, 80), 0.0056851559967503055, 1e-12 * 0.0057);
  EXPECT_NEAR(SignTestPValue(4850, 5150), 0.0027879675177127188, 1e-9 * 0.0028);
  EXPECT_EQ(SignTestPValue(5000, 5000), 1.0);
}

TEST(WilcoxonTest, ExactDistributionOnASmallSample) {
  // d = 1 2 3 4 5 -6 7 8 and a zero (dropped): n = 8, no ties, ranks = |d|.
  // W- = 6, W+ = 36 - 6 = 30. Subsets of {1..8} with sum <= 6: sum 0: {} ; 1: {1}; 2: {2};
  // 3: {3},{1,2}; 4: {4},{1,3}; 5: {5},{1,4},{2,3}; 6: {6},{1,5},{2,4},{1,2,3} -> 14 of 2^8 = 256.
  // p = 2 * 14/256 = 0.109375.
  const std::vector<double> d = {1, 2, 3, 4, 5, -6, 7, 8, 0};
  const auto r = WilcoxonSignedRank(d);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exact);
  EXPECT_EQ(r->n, 8);
  EXPECT_EQ(r->w_plus, 30.0);
  EXPECT_EQ(r->w_minus, 6.0);
  EXPECT_EQ(r->p_value, 0.109375);

  // Mirrored differences: the same p, the roles of W+ and W- swapped.
  std::vector<double> mirrored;
  for (double x : d) mirrored.push_back(-x);
  const auto m = WilcoxonSignedRank(mirrored);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->w_plus, 6.0);
  EXPECT_EQ(m->p_value, 0.109375);
}

TEST(WilcoxonTest, AllPositiveSmallSampleGivesTheSmallestExactP) {
  // n = 5, all positive: only the empty subset has sum <= 0, p = 2/32 = 0.0625.
  const auto r = WilcoxonSignedRank(std::vector<double>{0.5, 0.1, 0.3, 0.2, 0.4});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->exact);
  EXPECT_EQ(r->w_plus, 15.0);
  EXPECT_EQ(r->p_value, 0.0625);
}

TEST(WilcoxonTest, TiesUseTheNormalApproximationWithCorrections) {
  // d = 1 1 -1 | 2 2 2 -2 | 3 3 3 3 | 0 (dropped): n = 11.
  // |d| = 1 takes ranks 1-3 (average 2), |d| = 2 ranks 4-7 (5.5), |d| = 3 ranks 8-11 (9.5).
  // W+ = 2*2 + 3*5.5 + 4*9.5 = 58.5, W- = 2 + 5.5 = 7.5 (sum 66 = 11*12/2).
  // mean = 11*12/4 = 33; var = 11*12*23/24 - ((27-3) + (64-4) + (64-4))/48 = 126.5 - 3 = 123.5;
  // z = (|58.5 - 33| - 0.5) / sqrt(123.5) = 25 / 11.113055 = 2.2496064;
  // p = erfc(z / sqrt(2)) = 0.024473944795446848.
  const std::vector<double> d = {1, 1, -1, 2, 2, 2, -2, 3, 3, 3, 3, 0};
  const auto r = WilcoxonSignedRank(d);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->exact);
  EXPECT_EQ(r->n, 11);
  EXPECT_EQ(r->w_plus, 58.5);
  EXPECT_EQ(r->w_minus, 7.5);
  EXPECT_NEAR(r->p_value, 0.024473944795446848, 1e-15);
}

TEST(WilcoxonTest, LargeSamplesUseTheNormalApproximation) {
  // n = 60 > 50 without ties, all positive: W+ = 1830, mean = 915, var = 60*61*121/24 = 18452.5,
  // z = 914.5 / 135.84 = 6.732, p = erfc(z / sqrt(2)) ~ 1.7e-11.
  std::vector<double> d;
  for (int i = 1; i <= 60; ++i) d.push_back(i);
  const auto r = WilcoxonSignedRank(d);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->exact);
  EXPECT_NEAR(r->p_value, std::erfc(914.5 / std::sqrt(18452.5) / std::sqrt(2.0)), 1e-20);
  EXPECT_GT(r->p_value, 1e-11);
  EXPECT_LT(r->p_value, 2e-11);
}

TEST(WilcoxonTest, AllZeroDifferencesGiveOne) {
  const auto r = WilcoxonSignedRank(std::vector<double>{0, 0, 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->n, 0);
  EXPECT_EQ(r->p_value, 1.0);
  EXPECT_EQ(RankBiserial(*r), 0.0);
}

TEST(WilcoxonTest, NonFiniteDifferenceIsAnError) {
  const auto r = WilcoxonSignedRank(std::vector<double>{1, NAN, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("difference[1]"));
}

// Ten differences with mean 0.1 and a spread of about 0.26.
const std::vector<double> kTen = {-0.3, 0.1, 0.4, -0.2, 0.5, 0.0, 0.2, -0.1, 0.3, 0.1};

TEST(BootstrapTest, SameSeedSameIntervalOtherSeedAnother) {
  // sin(1..12): values on no grid, so two seeds cannot land on the same quantiles by chance.
  std::vector<double> d;
  for (int i = 1; i <= 12; ++i) d.push_back(std::sin(i));
  const BootstrapOptions options{.resamples = 2000, .seed = 7, .alpha = 0.05};
  const auto a = PairedBootstrapInterval(d, options);
  const auto b = PairedBootstrapInterval(d, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->low, b->low);
  EXPECT_EQ(a->high, b->high);
  BootstrapOptions other = options;
  other.seed = 8;
  const auto c = PairedBootstrapInterval(d, other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->low, a->low);
  EXPECT_NE(c->high, a->high);
}

TEST(BootstrapTest, IntervalContainsTheMeanAndShrinksWithN) {
  const BootstrapOptions options;  // 10,000 resamples, seed 0, 95%
  const auto ten = PairedBootstrapInterval(kTen, options);
  ASSERT_TRUE(ten.ok());
  const double mean = MeanDifference(kTen);
  EXPECT_LT(ten->low, mean);
  EXPECT_GT(ten->high, mean);
  // The same pattern ten times: 100 pairs with the same mean and spread. The standard error falls
  // by sqrt(10) = 3.16, so the width should too (well below half of it).
  std::vector<double> hundred;
  for (int i = 0; i < 10; ++i) hundred.insert(hundred.end(), kTen.begin(), kTen.end());
  const auto wide = PairedBootstrapInterval(hundred, options);
  ASSERT_TRUE(wide.ok());
  EXPECT_LT(wide->low, mean);
  EXPECT_GT(wide->high, mean);
  EXPECT_LT(wide->high - wide->low, 0.5 * (ten->high - ten->low));
  EXPECT_GT(wide->high - wide->low, 0.2 * (ten->high - ten->low));
}

TEST(BootstrapTest, ConstantDifferencesGiveAPointInterval) {
  // Every resample mean of four 0.5s is exactly 0.5.
  const auto r = PairedBootstrapInterval(std::vector<double>{0.5, 0.5, 0.5, 0.5}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->low, 0.5);
  EXPECT_EQ(r->high, 0.5);
}

TEST(BootstrapTest, RejectsEmptyInputAndBadOptions) {
  EXPECT_FALSE(PairedBootstrapInterval(std::vector<double>{}, {}).ok());
  EXPECT_FALSE(PairedBootstrapInterval(kTen, {.resamples = 0}).ok());
  EXPECT_FALSE(PairedBootstrapInterval(kTen, {.alpha = 1.0}).ok());
  EXPECT_FALSE(PairedBootstrapInterval(std::vector<double>{1.0, INFINITY}, {}).ok());
}

TEST(HolmTest, KnownExample) {
  // Sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, but the
  // running maximum keeps 0.06). In input order: 0.03, 0.06, 0.06, 0.02.
  const auto adj = HolmAdjust(std::vector<double>{0.01, 0.04, 0.03, 0.005});
  ASSERT_TRUE(adj.ok());
  ASSERT_EQ(adj->size(), 4u);
  EXPECT_DOUBLE_EQ((*adj)[0], 0.03);
  EXPECT_DOUBLE_EQ((*adj)[1], 0.06);
  EXPECT_DOUBLE_EQ((*adj)[2], 0.06);
  EXPECT_DOUBLE_EQ((*adj)[3], 0.02);
}

TEST(HolmTest, CapsAtOneAndKeepsOneHypothesisAsIs) {
  // 0.5 * 2 = 1, then max(1, 0.6) = 1.
  const auto capped = HolmAdjust(std::vector<double>{0.6, 0.5});
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ((*capped)[0], 1.0);
  EXPECT_EQ((*capped)[1], 1.0);
  const auto single = HolmAdjust(std::vector<double>{0.125});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)[0], 0.125);
  const auto none = HolmAdjust(std::vector<double>{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(HolmAdjust(std::vector<double>{0.1, 1.5}).ok());
  EXPECT_FALSE(HolmAdjust(std::vector<double>{NAN}).ok());
}

TEST(EffectSizeTest, CohenDzIsMeanOverSampleSd) {
  // d = 1 2 3: mean 2, sd = sqrt(((1-2)^2 + 0 + (3-2)^2) / 2) = 1, d_z = 2.
  EXPECT_DOUBLE_EQ(CohenDz(std::vector<double>{1, 2, 3}), 2.0);
  EXPECT_DOUBLE_EQ(MeanDifference(std::vector<double>{1, 2, 3}), 2.0);
  // No spread (0.1 ten times: rounding makes the mean differ from 0.1 in the last bit) or one
  // pair: 0.
  EXPECT_EQ(CohenDz(std::vector<double>(10, 0.1)), 0.0);
  EXPECT_EQ(CohenDz(std::vector<double>{3}), 0.0);
}

TEST(EffectSizeTest, RankBiserialIsTheNetShareOfTheRankSum) {
  // From the exact example: (30 - 6) / 36 = 2/3.
  const auto r = WilcoxonSignedRank(std::vector<double>{1, 2, 3, 4, 5, -6, 7, 8});
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(RankBiserial(*r), 2.0 / 3.0);
  // All pairs favour the first method: r = 1.
  const auto all = WilcoxonSignedRank(std::vector<double>{0.2, 0.1, 0.3});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(RankBiserial(*all), 1.0);
}

}  // namespace
}  // namespace ripplekv::method
