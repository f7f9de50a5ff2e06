// Student t quantiles against printed table values and closed forms; means with intervals.

#include "eval/stats.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "gtest/gtest.h"

namespace ripplekv::eval {
namespace {

TEST(StudentTTest, QuantilesMatchTableValues) {
  // Two-sided 95% critical values as printed in t tables (3 decimals).
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.706, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.303, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.975, 5), 2.571, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.228, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.042, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.975, 120), 1.980, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.995, 10), 3.169, 5e-4);
  EXPECT_NEAR(StudentTQuantile(0.95, 20), 1.725, 5e-4);
}

TEST(StudentTTest, QuantilesMatchScipy) {
  // scipy.stats.t.ppf(0.975, df).
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.70620474, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.30265273, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 5), 2.57058184, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.22813885, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.04227246, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 120), 1.97993041, 1e-7);
  EXPECT_NEAR(StudentTQuantile(0.975, 1.4705882352941178), 6.18811494076925, 1e-8);
}

TEST(StudentTTest, QuantilesMatchClosedForms) {
  // df = 1 (Cauchy): tan(pi (p - 1/2)); df = 2: (2p - 1) / sqrt(2 p (1 - p)).
  for (double p : {0.6, 0.9, 0.975, 0.999}) {
    EXPECT_NEAR(StudentTQuantile(p, 1), std::tan(std::numbers::pi * (p - 0.5)),
                1e-9 * std::tan(std::numbers::pi * (p - 0.5)));
    EXPECT_NEAR(StudentTQuantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-9);
  }
  // A large df approaches the normal quantile 1.959964.
  EXPECT_NEAR(StudentTQuantile(0.975, 1e7), 1.959964, 1e-5);
}

TEST(StudentTTest, QuantileIsSymmetricAndInvertsTheCdf) {
  EXPECT_DOUBLE_EQ(StudentTQuantile(0.5, 7), 0.0);
  EXPECT_NEAR(StudentTQuantile(0.025, 10), -StudentTQuantile(0.975, 10), 1e-12);
  for (double df : {0.5, 1.0, 3.7, 29.0}) {
    for (double p : {0.01, 0.3, 0.8, 0.99}) {
      EXPECT_NEAR(StudentTCdf(StudentTQuantile(p, df), df), p, 1e-10) << df << " " << p;
    }
  }
}

TEST(StudentTTest, OutOfDomainIsNaN) {
  EXPECT_TRUE(std::isnan(StudentTQuantile(0.0, 5)));
  EXPECT_TRUE(std::isnan(StudentTQuantile(1.0, 5)));
  EXPECT_TRUE(std::isnan(StudentTQuantile(0.9, 0)));
  EXPECT_TRUE(std::isnan(StudentTCdf(1.0, -1)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1.5, 1, 1)));
}

TEST(IncompleteBetaTest, MatchesClosedForms) {
  // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b; I_x(a, b) = 1 - I_{1-x}(b, a).
  EXPECT_NEAR(RegularizedIncompleteBeta(0.3, 1, 1), 0.3, 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.7, 3, 1), std::pow(0.7, 3), 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.2, 1, 4), 1 - std::pow(0.8, 4), 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.35, 2.5, 7), 1 - RegularizedIncompleteBeta(0.65, 7, 2.5),
              1e-14);
}

TEST(MeanWithCiTest, UsesTheSampleStddevAndTheTQuantile) {
  const std::vector<double> v = {1, 2, 3, 4};
  const MeanCi ci = MeanWithCi(v);
  EXPECT_EQ(ci.n, 4);
  EXPECT_DOUBLE_EQ(ci.mean, 2.5);
  EXPECT_NEAR(ci.stddev, std::sqrt(5.0 / 3.0), 1e-15);
  // t(0.975, 3) = 3.182446305
  EXPECT_NEAR(ci.half_width, 3.182446305 * std::sqrt(5.0 / 3.0) / 2.0, 1e-8);
  EXPECT_NEAR(ci.low(), 2.5 - ci.half_width, 1e-15);
}

TEST(MeanWithCiTest, OneValueHasNoInterval) {
  const std::vector<double> v = {0.7};
  const MeanCi ci = MeanWithCi(v);
  EXPECT_EQ(ci.n, 1);
  EXPECT_DOUBLE_EQ(ci.mean, 0.7);
  EXPECT_TRUE(std::isnan(ci.half_width));
  EXPECT_TRUE(std::isnan(MeanWithCi({}).mean));
}

TEST(MeanWithCiTest, ConstantValuesHaveZeroWidth) {
  const std::vector<double> v = {1, 1, 1};
  EXPECT_DOUBLE_EQ(MeanWithCi(v).half_width, 0.0);
}

}  // namespace
}  // namespace ripplekv::eval
