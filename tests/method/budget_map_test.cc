#include "method/budget_map.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/budget_format.h"
#include "nlohmann/json.hpp"

namespace ripplekv::method {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

BudgetOptions Options(double ratio, int64_t average_tokens) {
  BudgetOptions o;
  o.ratio = ratio;
  o.average_tokens = average_tokens;
  return o;
}

// The exact real-valued water-filling solution, by bisection on lambda:
// b_l = clamp(lambda * m_l, lo, hi) with sum(b) == total.
std::vector<double> ReferenceWaterFill(const std::vector<double>& m, int64_t total, int64_t lo,
                                       std::optional<int64_t> hi) {
  auto budgets = [&](double lambda) {
    std::vector<double> b(m.size());
    for (size_t l = 0; l < m.size(); ++l) {
      b[l] = std::max(lambda * m[l], static_cast<double>(lo));
      if (hi) b[l] = std::min(b[l], static_cast<double>(*hi));
    }
    return b;
  };
  auto sum = [](const std::vector<double>& b) { return std::accumulate(b.begin(), b.end(), 0.0); };
  double a = 0.0, z = static_cast<double>(total);  // m_l >= 1, so lambda <= total
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (a + z);
    (sum(budgets(mid)) < static_cast<double>(total) ? a : z) = mid;
  }
  return budgets(0.5 * (a + z));
}

// --- The normative steps, worked by hand -------------------------------------------------------

// s = [0.01, 0.04, 0.02], r = 4, B = 100 (T = 300), no bounds:
//   n = [0, 1, 1/3]
//   m = [1, 4, 4^(1/3) = 1.5874010519681996], sum(m) = 6.587401051968199
//   b = 300 m / sum(m) = [45.541481, 182.165924, 72.292595]
//   floors [45, 182, 72] sum to 299; the one token left goes to the largest remainder (layer 0,
//   .541) -> [46, 182, 72].
TEST(BudgetMapTest, HandComputedThreeLayerExample) {
  const std::vector<double> s = {0.01, 0.04, 0.02};
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, Options(4.0, 100));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->total_tokens, 300);
  EXPECT_DOUBLE_EQ(map->normalized[0], 0.0);
  EXPECT_DOUBLE_EQ(map->normalized[1], 1.0);
  EXPECT_NEAR(map->normalized[2], 1.0 / 3.0, 1e-15);
  EXPECT_DOUBLE_EQ(map->multipliers[0], 1.0);
  EXPECT_DOUBLE_EQ(map->multipliers[1], 4.0);
  EXPECT_NEAR(map->multipliers[2], 1.5874010519681996, 1e-15);
  EXPECT_THAT(map->tokens, ElementsAre(46, 182, 72));
}

// Same profile with b_max = 150: layer 1 (182.17) is clamped to 150 and the other 150 tokens are
// spread over layers 0 and 2 in proportion 1 : 1.5874 -> [57.973, 92.027] -> [58, 150, 92].
TEST(BudgetMapTest, ClampsAtMaxAndRedistributesToFreeLayers) {
  const std::vector<double> s = {0.01, 0.04, 0.02};
  BudgetOptions o = Options(4.0, 100);
  o.max_tokens = 150;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(58, 150, 92));
}

// With b_min = 60: layer 0 (45.54) is raised to 60 and the remaining 240 split 4 : 1.5874 over
// layers 1 and 2 -> [171.815, 68.185] -> [60, 172, 68].
TEST(BudgetMapTest, ClampsAtMinAndTakesTheTokensFromFreeLayers) {
  const std::vector<double> s = {0.01, 0.04, 0.02};
  BudgetOptions o = Options(4.0, 100);
  o.min_tokens = 60;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(60, 172, 68));
}

// m = [1, 1, 8], T = 30, bounds [4, 10]: the first spread, 30 m / 10 = [3, 3, 24], violates both
// bounds. Fixing every violator at once ([4, 4, 10]) would strand 12 tokens with no free layer;
// the correct solution lifts every layer to the cap.
TEST(BudgetMapTest, ResolvesViolationsOfBothBoundsInOneRound) {
  const std::vector<double> s = {0.0, 0.0, 1.0};
  BudgetOptions o = Options(8.0, 10);
  o.min_tokens = 4;
  o.max_tokens = 10;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(10, 10, 10));

  o.max_tokens = 12;  // now layers 0 and 1 share 18 tokens after layer 2 takes its cap of 12
  map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(9, 9, 12));
}

// Rank mode, s = [0.3, 0.1, 0.3, 0.2], r = 8, B = 100 (T = 400):
//   ranks: 0.1 -> 0, 0.2 -> 1, the two 0.3 share ranks 2 and 3 -> 2.5; n = rank / 3
//   n = [5/6, 0, 5/6, 1/3], m = 8^n = [5.656854, 1, 5.656854, 2], sum(m) = 14.313708
//   b = 400 m / sum(m) = [158.082, 27.945, 158.082, 55.890]
//   floors sum to 398; the two tokens left go to layers 1 (.945) and 3 (.890).
TEST(BudgetMapTest, RankModeHandWorkedExample) {
  const std::vector<double> s = {0.3, 0.1, 0.3, 0.2};
  BudgetOptions o = Options(8.0, 100);
  o.normalization = Normalization::kRank;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->normalized, ElementsAre(2.5 / 3, 0.0, 2.5 / 3, 1.0 / 3));
  EXPECT_NEAR(map->multipliers[0], 5.656854249492381, 1e-12);
  EXPECT_DOUBLE_EQ(map->multipliers[3], 2.0);
  EXPECT_THAT(map->tokens, ElementsAre(158, 28, 158, 56));
}

// Log-min-max, s = [0, 1e-6, 1e-2], eps = 1e-6, r = 10, B = 100 (T = 300):
//   x = log(s + eps) = [log 1e-6, log 2e-6, log 0.010001]
//   n = [0, log 2 / log 10001 = 0.0752567, 1], m = 10^n = [1, 1.1892049, 10]
//   b = 300 m / 12.1892049 = [24.612, 29.269, 246.119] -> [25, 29, 246].
// Plain min-max would give layer 1 almost nothing more than layer 0 (n = 1e-4); the log spreads
// small sensitivities apart.
TEST(BudgetMapTest, LogMinMaxModeHandWorkedExample) {
  const std::vector<double> s = {0.0, 1e-6, 1e-2};
  BudgetOptions o = Options(10.0, 100);
  o.normalization = Normalization::kLogMinMax;
  o.log_epsilon = 1e-6;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_DOUBLE_EQ(map->normalized[0], 0.0);
  EXPECT_NEAR(map->normalized[1], std::log(2.0) / std::log(10001.0), 1e-12);
  EXPECT_DOUBLE_EQ(map->normalized[2], 1.0);
  EXPECT_NEAR(map->multipliers[1], 1.1892048777221498, 1e-12);
  EXPECT_THAT(map->tokens, ElementsAre(25, 29, 246));
}

TEST(BudgetMapTest, LogMinMaxOfEvenlySpacedDecadesIsLinear) {
  const std::vector<double> s = {1e-4, 1e-3, 1e-2};
  BudgetOptions o = Options(4.0, 70);  // m ~ [1, 2, 4], T = 210 -> [30, 60, 120]
  o.normalization = Normalization::kLogMinMax;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_NEAR(map->normalized[1], 0.5, 1e-6);
  EXPECT_THAT(map->tokens, ElementsAre(30, 60, 120));
}

// --- Flat profiles -----------------------------------------------------------------------------

TEST(BudgetMapTest, FlatProfileGivesUniformBudgetsInEveryMode) {
  for (Normalization mode :
       {Normalization::kMinMax, Normalization::kRank, Normalization::kLogMinMax}) {
    SCOPED_TRACE(std::string(NormalizationName(mode)));
    const std::vector<double> s(30, 0.125);
    BudgetOptions o = Options(5.0, 128);
    o.normalization = mode;
    StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_EQ(map->tokens, std::vector<int64_t>(30, 128));
    EXPECT_EQ(map->multipliers, std::vector<double>(30, 1.0));
    EXPECT_EQ(map->normalized, std::vector<double>(30, 0.0));
  }
}

TEST(BudgetMapTest, FlatProfileWithTotalNotDivisibleByLayersDiffersByAtMostOneToken) {
  const std::vector<double> s(7, 0.5);
  BudgetOptions o;
  o.ratio = 3.0;
  o.total_tokens = 1000;  // 1000 = 7 * 142 + 6
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(Sum(map->tokens), 1000);
  // Equal remainders: the extra tokens go to the lowest layer indices.
  EXPECT_THAT(map->tokens, ElementsAre(143, 143, 143, 143, 143, 143, 142));
}

TEST(BudgetMapTest, SingleLayerGetsTheWholeBudget) {
  const std::vector<double> s = {0.7};
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, Options(4.0, 512));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(512));
}

// --- Properties over many random inputs --------------------------------------------------------

struct RandomCase {
  std::vector<double> s;
  BudgetOptions options;
};

RandomCase MakeRandomCase(std::mt19937_64& rng) {
  RandomCase c;
  const int L = std::uniform_int_distribution<int>(1, 48)(rng);
  const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int l = 0; l < L; ++l) {
    double v = 0;
    switch (kind) {
      case 0:  // spread over decades, as real KL profiles are
        v = std::pow(10.0, -6.0 + 5.0 * u(rng));
        break;
      case 1:  // few distinct values: many ties
        v = 0.01 * std::uniform_int_distribution<int>(0, 3)(rng);
        break;
      case 2:  // flat
        v = 0.25;
        break;
      default:
        v = u(rng);
    }
    c.s.push_back(v);
  }
  BudgetOptions& o = c.options;
  o.ratio = 1.0 + 19.0 * u(rng) * u(rng);
  if (u(rng) < 0.2) o.ratio = 1.0;
  o.normalization = static_cast<Normalization>(std::uniform_int_distribution<int>(0, 2)(rng));
  int64_t total = 0;
  if (u(rng) < 0.5) {
    o.average_tokens = std::uniform_int_distribution<int64_t>(1, 5000)(rng);
    total = L * o.average_tokens;
  } else {
    total = std::uniform_int_distribution<int64_t>(L, int64_t{L} * 5000)(rng);
    o.total_tokens = total;
  }
  const int64_t floor_avg = total / L, ceil_avg = (total + L - 1) / L;
  if (u(rng) < 0.5) o.min_tokens = std::uniform_int_distribution<int64_t>(1, floor_avg)(rng);
  if (u(rng) < 0.5) {
    o.max_tokens = std::uniform_int_distribution<int64_t>(ceil_avg, 3 * ceil_avg)(rng);
  }
  return c;
}

TEST(BudgetMapPropertyTest, RandomProfilesSumExactlyRespectBoundsAndMatchWaterFilling) {
  std::mt19937_64 rng(20240531);
  for (int iteration = 0; iteration < 3000; ++iteration) {
    const RandomCase c = MakeRandomCase(rng);
    const BudgetOptions& o = c.options;
    SCOPED_TRACE(::testing::Message()
                 << "iteration " << iteration << " L=" << c.s.size() << " r=" << o.ratio
                 << " mode=" << NormalizationName(o.normalization) << " B=" << o.average_tokens
                 << " T=" << o.total_tokens.value_or(0) << " min=" << o.min_tokens
                 << " max=" << o.max_tokens.value_or(-1));
    StatusOr<BudgetMap> map = ComputeBudgetMap(c.s, o);
    ASSERT_TRUE(map.ok()) << map.status();
    const size_t L = c.s.size();
    ASSERT_EQ(map->tokens.size(), L);
    const int64_t total = TotalTokens(L, o);
    EXPECT_EQ(map->total_tokens, total);
    EXPECT_EQ(Sum(map->tokens), total);

    const std::vector<double> reference =
        ReferenceWaterFill(map->multipliers, total, o.min_tokens, o.max_tokens);
    for (size_t l = 0; l < L; ++l) {
      EXPECT_GE(map->tokens[l], o.min_tokens) << "layer " << l;
      if (o.max_tokens) {
        EXPECT_LE(map->tokens[l], *o.max_tokens) << "layer " << l;
      }
      // Rounding moves a budget by less than one token from the exact water-filling solution.
      EXPECT_LT(std::abs(static_cast<double>(map->tokens[l]) - reference[l]), 1.0 + 1e-6)
          << "layer " << l;
      // Order follows sensitivity; equal sensitivities differ by at most the rounding token.
      for (size_t k = 0; k < L; ++k) {
        if (c.s[l] < c.s[k]) {
          EXPECT_LE(map->tokens[l], map->tokens[k]) << l << " vs " << k;
        }
        if (c.s[l] == c.s[k]) {
          EXPECT_LE(std::abs(map->tokens[l] - map->tokens[k]), 1);
        }
      }
    }
    ASSERT_TRUE(ValidateBudgetMap(*map).ok()) << ValidateBudgetMap(*map);
  }
}

TEST(BudgetMapPropertyTest, MultipliersSpanExactlyTheRatioBeforeClamping) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int iteration = 0; iteration < 500; ++iteration) {
    const int L = std::uniform_int_distribution<int>(2, 64)(rng);
    std::vector<double> s(L);
    for (double& v : s) v = std::pow(10.0, -5.0 + 4.0 * u(rng));
    const double r = 1.0 + 15.0 * u(rng);
    for (Normalization mode :
         {Normalization::kMinMax, Normalization::kLogMinMax, Normalization::kRank}) {
      BudgetOptions o = Options(r, 64);
      o.normalization = mode;
      StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
      ASSERT_TRUE(map.ok()) << map.status();
      const auto [mn, mx] = std::minmax_element(map->multipliers.begin(), map->multipliers.end());
      // Distinct random values: the least sensitive layer has m = 1, the most m = r, exactly.
      EXPECT_EQ(*mn, 1.0);
      EXPECT_EQ(*mx, r);
      const size_t least = std::min_element(s.begin(), s.end()) - s.begin();
      const size_t most = std::max_element(s.begin(), s.end()) - s.begin();
      EXPECT_EQ(map->multipliers[least], 1.0);
      EXPECT_EQ(map->multipliers[most], r);
    }
  }
}

TEST(BudgetMapTest, RatioOneGivesUniformBudgetsWhateverTheProfile) {
  const std::vector<double> s = {0.5, 0.001, 0.2, 0.9};
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, Options(1.0, 100));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(100, 100, 100, 100));
}

// r = 1 gives 7 / 3 = 2.333 tokens to each layer; the one rounding token goes to the most
// sensitive layer, not to layer 0.
TEST(BudgetMapTest, EqualRemaindersGoToTheMoreSensitiveLayer) {
  const std::vector<double> s = {0.1, 0.5, 0.3};
  BudgetOptions o;
  o.ratio = 1.0;
  o.total_tokens = 7;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(2, 3, 2));
}

TEST(BudgetMapTest, MoreSensitiveLayersGetMoreTokens) {
  const std::vector<double> s = {0.02, 0.5, 0.001, 0.1, 0.3};
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, Options(8.0, 256));
  ASSERT_TRUE(map.ok()) << map.status();
  // Sensitivity order: 2 < 0 < 3 < 4 < 1.
  EXPECT_LT(map->tokens[2], map->tokens[0]);
  EXPECT_LT(map->tokens[0], map->tokens[3]);
  EXPECT_LT(map->tokens[3], map->tokens[4]);
  EXPECT_LT(map->tokens[4], map->tokens[1]);
}

// Found by tests/fuzz/profile_json_fuzz: with r = 1e300 and T = 2^40, T * m_l overflowed to
// infinity before the division by sum(m) (UBSan: inf converted to int64); with r = DBL_MAX two
// layers at r made sum(m) infinite. Any finite r >= 1 is valid, so both must give exact maps.
TEST(BudgetMapTest, HugeRatiosDoNotOverflow) {
  const std::vector<double> s = {0.0, 2e-5, 0.625, 1.5};
  BudgetOptions o;
  o.ratio = 1e300;
  o.total_tokens = int64_t{1} << 40;
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(Sum(map->tokens), int64_t{1} << 40);
  // Layer 3 has r times layer 0's multiplier: all but a few tokens are its own.
  EXPECT_EQ(map->tokens[0], 1);
  EXPECT_GT(map->tokens[3], (int64_t{1} << 40) - 1000000);
  EXPECT_TRUE(ValidateBudgetMap(*map).ok()) << ValidateBudgetMap(*map);

  const std::vector<double> two_top = {1.0, 0.0, 1.0};
  BudgetOptions max_ratio = Options(std::numeric_limits<double>::max(), 100);
  map = ComputeBudgetMap(two_top, max_ratio);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->tokens, ElementsAre(150, 1, 149));
}

// --- Errors ------------------------------------------------------------------------------------

std::string ErrorOf(const std::vector<double>& s, const BudgetOptions& o) {
  StatusOr<BudgetMap> map = ComputeBudgetMap(s, o);
  EXPECT_FALSE(map.ok());
  if (map.ok()) return "";
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument) << map.status();
  return std::string(map.status().message());
}

TEST(BudgetMapErrorTest, InfeasibleBoundsNameTheNumbers) {
  const std::vector<double> s(30, 0.1);
  BudgetOptions o = Options(2.0, 80);
  o.min_tokens = 100;
  EXPECT_THAT(ErrorOf(s, o), HasSubstr("30 layers x min_tokens 100 = 3000 > total 2400"));
  o.min_tokens = 1;
  o.max_tokens = 70;
  EXPECT_THAT(ErrorOf(s, o), HasSubstr("30 layers x max_tokens 70 = 2100 < total 2400"));
  o.min_tokens = 50;
  o.max_tokens = 40;
  EXPECT_THAT(ErrorOf(s, o), HasSubstr("min_tokens 50 > max_tokens 40"));
}

TEST(BudgetMapErrorTest, RejectsBadParameters) {
  const std::vector<double> s = {0.1, 0.2};
  EXPECT_THAT(ErrorOf(s, Options(0.5, 10)), HasSubstr("ratio must be finite and >= 1, got 0.5"));
  EXPECT_THAT(ErrorOf(s, Options(NAN, 10)), HasSubstr("ratio"));
  EXPECT_THAT(ErrorOf(s, Options(2.0, 0)), HasSubstr("average_tokens must be > 0, got 0"));
  EXPECT_THAT(ErrorOf(s, Options(2.0, -5)), HasSubstr("average_tokens must be > 0"));
  BudgetOptions both = Options(2.0, 10);
  both.total_tokens = 20;
  EXPECT_THAT(ErrorOf(s, both), HasSubstr("not both"));
  BudgetOptions zero_min = Options(2.0, 10);
  zero_min.min_tokens = 0;
  EXPECT_THAT(ErrorOf(s, zero_min), HasSubstr("min_tokens must be >= 1"));
  BudgetOptions huge = Options(2.0, int64_t{1} << 62);
  EXPECT_THAT(ErrorOf(s, huge), HasSubstr("exceeds the limit"));
  BudgetOptions bad_eps = Options(2.0, 10);
  bad_eps.normalization = Normalization::kLogMinMax;
  bad_eps.log_epsilon = 0;
  EXPECT_THAT(ErrorOf(s, bad_eps), HasSubstr("log_epsilon"));
}

TEST(BudgetMapErrorTest, RejectsBadSensitivities) {
  EXPECT_THAT(ErrorOf({}, Options(2.0, 10)), HasSubstr("empty profile"));
  EXPECT_THAT(ErrorOf({0.1, NAN, 0.3}, Options(2.0, 10)),
              HasSubstr("sensitivity of layer 1 is nan"));
  EXPECT_THAT(ErrorOf({0.1, 0.2, -0.3}, Options(2.0, 10)),
              HasSubstr("sensitivity of layer 2 is -0.3"));
  EXPECT_THAT(ErrorOf({INFINITY}, Options(2.0, 10)), HasSubstr("layer 0"));
}

TEST(BudgetMapErrorTest, BudgetAboveMaxContextIsAnErrorNamingIt) {
  const std::vector<double> s = {0.01, 0.04, 0.02};
  BudgetOptions o = Options(4.0, 100);  // layer 1 gets 182
  o.max_context = 150;
  EXPECT_THAT(ErrorOf(s, o), HasSubstr("layer 1 gets 182 tokens, more than max_context 150"));
  o.max_tokens = 150;  // the remedy the message suggests
  EXPECT_TRUE(ComputeBudgetMap(s, o).ok());
}

TEST(BudgetMapTest, NormalizationNamesRoundTrip) {
  for (Normalization mode :
       {Normalization::kMinMax, Normalization::kRank, Normalization::kLogMinMax}) {
    EXPECT_EQ(*ParseNormalization(NormalizationName(mode)), mode);
  }
  EXPECT_FALSE(ParseNormalization("linear").ok());
}

// --- Profile input -----------------------------------------------------------------------------

SensitivityProfile ProfileOf(const std::vector<double>& s) {
  SensitivityProfile p;
  p.model = {.hash = "ab12",
             .architecture = "llama",
             .name = "t",
             .n_layers = int64_t(s.size()),
             .n_kv_heads = 1,
             .head_dim = 4,
             .d_model = 8,
             .vocab_size = 16};
  p.params.alpha = 0.5;
  p.params.trials = 1;
  p.params.samples = 1;
  p.params.context_len = 16;
  p.params.probe_len = 4;
  for (size_t l = 0; l < s.size(); ++l) {
    p.params.layers.push_back(int64_t(l));
    p.layers.push_back({.layer = int64_t(l),
                        .mean_kl = s[l],
                        .std_error = 0,
                        .count = 1,
                        .per_sample_mean = {s[l]}});
  }
  p.created_at = "2025-01-31T12:00:00Z";
  p.tool_version = "test";
  return p;
}

std::vector<int64_t> ThreeLayerTokens() { return {46, 182, 72}; }

TEST(BudgetMapTest, ProfileInputUsesMeanKlAndRecordsTheModelHash) {
  StatusOr<BudgetMap> map = ComputeBudgetMap(ProfileOf({0.01, 0.04, 0.02}), Options(4.0, 100));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->model_hash, "ab12");
  EXPECT_THAT(map->tokens, ElementsAre(46, 182, 72));
}

TEST(BudgetMapTest, ShrinkageUsesTheLowerConfidenceBoundOfEachLayer) {
  // Layer 1 looks most sensitive but is noisy: with z = 2 its bound 0.04 - 2 * 0.015 = 0.01 is
  // below layer 2's 0.02 - 2 * 0.001 = 0.018, and layer 0's 0.01 - 2 * 0.01 < 0 becomes 0.
  SensitivityProfile p = ProfileOf({0.01, 0.04, 0.02});
  p.layers[0].std_error = 0.01;
  p.layers[1].std_error = 0.015;
  p.layers[2].std_error = 0.001;
  BudgetOptions shrunk = Options(4.0, 100);
  shrunk.shrink_z = 2.0;
  StatusOr<BudgetMap> map = ComputeBudgetMap(p, shrunk);
  ASSERT_TRUE(map.ok()) << map.status();
  StatusOr<std::vector<double>> s = LayerSensitivities(p, 2.0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0], 0.0);
  EXPECT_NEAR((*s)[1], 0.01, 1e-15);
  EXPECT_NEAR((*s)[2], 0.018, 1e-15);
  StatusOr<BudgetMap> expected = ComputeBudgetMap(*s, Options(4.0, 100));
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(map->tokens, expected->tokens);
  EXPECT_EQ(map->options.shrink_z, 2.0);
  EXPECT_GT(map->tokens[2], map->tokens[1]);  // the steady layer now gets more than the noisy one
  // z = 0 is the plain means.
  EXPECT_EQ(ComputeBudgetMap(p, Options(4.0, 100))->tokens, ThreeLayerTokens());

  // The native document carries shrink_z, and only when it is set.
  StatusOr<std::string> text = BudgetMapToJson(*map);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("\"shrink_z\": 2"));
  StatusOr<BudgetMap> back = BudgetMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->options.shrink_z, 2.0);
  EXPECT_THAT(*BudgetMapToJson(*ComputeBudgetMap(p, Options(4.0, 100))),
              Not(HasSubstr("shrink_z")));
}

TEST(BudgetMapErrorTest, ShrinkageNeedsAProfileAndANonNegativeZ) {
  BudgetOptions o = Options(4.0, 100);
  o.shrink_z = 1.0;
  const std::vector<double> bare = {0.01, 0.04, 0.02};
  EXPECT_THAT(ComputeBudgetMap(bare, o).status().message(), HasSubstr("needs a profile"));
  o.shrink_z = -1.0;
  EXPECT_THAT(ComputeBudgetMap(ProfileOf(bare), o).status().message(), HasSubstr("shrink_z"));
}

TEST(BudgetMapErrorTest, ProfileMissingALayerIsRejected) {
  SensitivityProfile p = ProfileOf({0.01, 0.04, 0.02});
  p.params.layers = {0, 2};
  p.layers.erase(p.layers.begin() + 1);
  StatusOr<BudgetMap> map = ComputeBudgetMap(p, Options(4.0, 100));
  ASSERT_FALSE(map.ok());
  EXPECT_THAT(map.status().message(), HasSubstr("no sensitivity for layer 1 of 3"));
}

// --- Response profiles -------------------------------------------------------------------------

// A response profile of `selector` on the grid 32, 64, 128, 256 and the full context 512, one
// sample: `kl[l]` is layer l's KL at the first four budgets (the full cache's is 0).
SensitivityProfile ResponseProfileOf(const std::vector<std::vector<double>>& kl,
                                     ResponseSelector selector = ResponseSelector::kSnapKv) {
  SensitivityProfile p = ProfileOf(std::vector<double>(kl.size(), 0.0));
  p.params.objective = Objective::kResponse;
  p.params.selector = selector;
  p.params.context_len = 512;
  p.params.probe_len = 32;
  p.params.budgets = {32, 64, 128, 256, 512};
  p.params.trials = 5;
  for (size_t l = 0; l < kl.size(); ++l) {
    LayerSensitivity& layer = p.layers[l];
    layer.count = 5;
    layer.mean_kl = 0.0;
    for (size_t t = 0; t < p.params.budgets.size(); ++t) {
      const double value = t < kl[l].size() ? kl[l][t] : 0.0;
      layer.response.push_back({.budget = p.params.budgets[t], .mean_kl = value});
      layer.mean_kl += value / 5;
    }
    layer.per_sample_mean = {layer.mean_kl};
  }
  return p;
}

// Three layers: layer 1 loses the most at every budget, layer 2 the least.
SensitivityProfile ThreeLayerResponseProfile() {
  return ResponseProfileOf({{0.9, 0.5, 0.2, 0.05}, {2.0, 1.2, 0.6, 0.2}, {0.3, 0.1, 0.04, 0.01}});
}

TEST(ResponseBudgetMapTest, IsTheResponseAllocationOfTheProfile) {
  const SensitivityProfile profile = ThreeLayerResponseProfile();
  StatusOr<std::vector<ResponseCurve>> curves = ResponseCurves(profile);
  ASSERT_TRUE(curves.ok()) << curves.status();
  for (int64_t average : {32, 40, 100, 128, 300, 400}) {
    SCOPED_TRACE(testing::Message() << "average " << average);
    BudgetOptions options = Options(4.0, average);
    options.max_tokens = 400;
    StatusOr<BudgetMap> map = ComputeBudgetMap(profile, options);
    ASSERT_TRUE(map.ok()) << map.status();
    StatusOr<ResponseAllocation> expected =
        AllocateByResponse(*curves, 3 * average, {.min_tokens = 32, .max_tokens = 400});
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(map->tokens, expected->tokens);
    EXPECT_EQ(Sum(map->tokens), 3 * average);
    EXPECT_EQ(map->total_tokens, 3 * average);
    for (int64_t t : map->tokens) {
      EXPECT_GE(t, 32);
      EXPECT_LE(t, 400);
    }
    EXPECT_EQ(map->objective, Objective::kResponse);
    EXPECT_EQ(map->selector, ResponseSelector::kSnapKv);
    EXPECT_EQ(map->model_hash, "ab12");
    // A valid native document: multipliers in [1, ratio], the realized ratio.
    const auto [fewest, most] = std::minmax_element(map->tokens.begin(), map->tokens.end());
    EXPECT_EQ(map->options.ratio, static_cast<double>(*most) / static_cast<double>(*fewest));
    EXPECT_EQ(*std::max_element(map->multipliers.begin(), map->multipliers.end()),
              map->options.ratio);
    EXPECT_EQ(*std::min_element(map->multipliers.begin(), map->multipliers.end()), 1.0);
    StatusOr<std::string> text = BudgetMapToJson(*map);
    ASSERT_TRUE(text.ok()) << text.status();
  }
  // Between the extremes, the layer that loses the most gets the most.
  StatusOr<BudgetMap> map = ComputeBudgetMap(profile, Options(2.0, 100));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_GT(map->tokens[1], map->tokens[0]);
  EXPECT_GT(map->tokens[0], map->tokens[2]);
}

TEST(ResponseBudgetMapTest, TheLowerBoundIsRaisedToTheSelectorsSmallestBudget) {
  // SnapKV keeps its 32-token window whatever it is given: min_tokens 1 becomes 32, and the map
  // records it.
  StatusOr<BudgetMap> snapkv = ComputeBudgetMap(ThreeLayerResponseProfile(), Options(2.0, 40));
  ASSERT_TRUE(snapkv.ok()) << snapkv.status();
  EXPECT_EQ(snapkv->options.min_tokens, 32);
  for (int64_t t : snapkv->tokens) EXPECT_GE(t, 32);
  EXPECT_EQ(ResponseBounds(ResponseSelector::kSnapKv, Options(2.0, 40)).min_tokens, 32);
  BudgetOptions above = Options(2.0, 40);
  above.min_tokens = 36;
  EXPECT_EQ(ResponseBounds(ResponseSelector::kSnapKv, above).min_tokens, 36);
  // H2O keeps as little as one token.
  const SensitivityProfile h2o =
      ResponseProfileOf({{0.9, 0.5, 0.2, 0.05}, {2.0, 1.2, 0.6, 0.2}, {0.3, 0.1, 0.04, 0.01}},
                        ResponseSelector::kH2o);
  StatusOr<BudgetMap> low = ComputeBudgetMap(h2o, Options(2.0, 20));
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->options.min_tokens, 1);
  EXPECT_EQ(Sum(low->tokens), 60);
  EXPECT_EQ(low->selector, ResponseSelector::kH2o);
  // Too few tokens for SnapKV's window: the message says why the bound is 32.
  StatusOr<BudgetMap> infeasible = ComputeBudgetMap(ThreeLayerResponseProfile(), Options(2.0, 20));
  EXPECT_EQ(infeasible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(infeasible.status().message()),
              HasSubstr("min_tokens 32 = 96 > total 60 (3 x average_tokens 20) (min_tokens raised "
                        "to 32, the smallest budget snapkv keeps)"));
  BudgetOptions zero = Options(2.0, 100);
  zero.min_tokens = 0;  // still the caller's mistake, although the selector would raise it
  EXPECT_THAT(std::string(ComputeBudgetMap(ThreeLayerResponseProfile(), zero).status().message()),
              HasSubstr("min_tokens must be >= 1"));
}

TEST(ResponseBudgetMapTest, TheContextLengthCapsEveryLayer) {
  BudgetOptions options = Options(2.0, 100);
  options.max_context = 120;
  StatusOr<BudgetMap> map = ComputeBudgetMap(ThreeLayerResponseProfile(), options);
  ASSERT_TRUE(map.ok()) << map.status();
  for (int64_t t : map->tokens) EXPECT_LE(t, 120);
  EXPECT_EQ(Sum(map->tokens), 300);
  EXPECT_EQ(ResponseBounds(ResponseSelector::kSnapKv, options).max_tokens, 120);
  options.max_tokens = 110;
  EXPECT_EQ(ResponseBounds(ResponseSelector::kSnapKv, options).max_tokens, 110);
  options.max_tokens.reset();
  options.max_context = 90;
  StatusOr<BudgetMap> over = ComputeBudgetMap(ThreeLayerResponseProfile(), options);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("3 layers x max_context 90 < total 300"));
}

TEST(ResponseBudgetMapTest, TheMappingsParametersAreNotRead) {
  // Ratio, normalization and shrinkage are the noise mapping's: any values give the same map,
  // byte for byte, so a frozen map's version does not depend on them.
  SensitivityProfile profile = ThreeLayerResponseProfile();
  profile.layers[1].std_error = 0.5;
  StatusOr<BudgetMap> plain = ComputeBudgetMap(profile, Options(2.0, 100));
  ASSERT_TRUE(plain.ok()) << plain.status();
  BudgetOptions other = Options(0.5, 100);  // a ratio the noise mapping refuses
  other.normalization = Normalization::kRank;
  other.shrink_z = 2.0;
  other.log_epsilon = 1e-3;
  StatusOr<BudgetMap> changed = ComputeBudgetMap(profile, other);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*BudgetMapToJson(*changed), *BudgetMapToJson(*plain));
  EXPECT_EQ(changed->options.shrink_z, 0.0);
  EXPECT_EQ(changed->options.normalization, Normalization::kMinMax);
}

TEST(ResponseBudgetMapTest, ProfileErrorsAreToldApartFromOptionErrors) {
  EXPECT_TRUE(ValidateMapProfile(ThreeLayerResponseProfile()).ok());
  EXPECT_TRUE(ValidateMapProfile(ProfileOf({0.01, 0.04, 0.02})).ok());
  SensitivityProfile missing = ThreeLayerResponseProfile();
  missing.params.layers = {0, 2};
  missing.layers.erase(missing.layers.begin() + 1);
  EXPECT_THAT(std::string(ValidateMapProfile(missing).message()),
              HasSubstr("no response for layer 1 of 3"));
  EXPECT_THAT(std::string(ComputeBudgetMap(missing, Options(2.0, 100)).status().message()),
              HasSubstr("no response for layer 1 of 3"));
  SensitivityProfile noise_missing = ProfileOf({0.01, 0.04, 0.02});
  noise_missing.params.layers = {0, 2};
  noise_missing.layers.erase(noise_missing.layers.begin() + 1);
  EXPECT_THAT(std::string(ValidateMapProfile(noise_missing).message()),
              HasSubstr("no sensitivity for layer 1 of 3"));
  // A noise map records its objective too.
  StatusOr<BudgetMap> noise = ComputeBudgetMap(ProfileOf({0.01, 0.04, 0.02}), Options(4.0, 100));
  ASSERT_TRUE(noise.ok());
  EXPECT_EQ(noise->objective, Objective::kNoise);
}

// --- Output formats ----------------------------------------------------------------------------

BudgetMap ThreeLayerMap() {
  StatusOr<BudgetMap> map = ComputeBudgetMap(ProfileOf({0.01, 0.04, 0.02}), Options(4.0, 100));
  EXPECT_TRUE(map.ok()) << map.status();
  return *map;  // tokens [46, 182, 72]
}

// kvpress keeps int(Lc * (1 - ratio)) tokens of a layer's prefill (ScorerPress.compress).
int64_t KvpressKept(int64_t context_len, double ratio) {
  return static_cast<int64_t>(static_cast<double>(context_len) * (1.0 - ratio));
}

TEST(BudgetFormatTest, KvpressRatiosArePrunedFractionsThatGiveBackTheBudgets) {
  const BudgetMap map = ThreeLayerMap();
  StatusOr<std::string> text = FormatBudgetMap(map, BudgetFormat::kKvpress, 400);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  ASSERT_EQ(j.size(), 1u);
  const std::vector<double> ratios = j.at("compression_ratios").get<std::vector<double>>();
  ASSERT_EQ(ratios.size(), 3u);
  // 1 - 46/400 = 0.885, 1 - 182/400 = 0.545, 1 - 72/400 = 0.82.
  EXPECT_NEAR(ratios[0], 0.885, 1e-12);
  EXPECT_NEAR(ratios[1], 0.545, 1e-12);
  EXPECT_NEAR(ratios[2], 0.82, 1e-12);
  for (size_t l = 0; l < 3; ++l) EXPECT_EQ(KvpressKept(400, ratios[l]), map.tokens[l]);
}

TEST(BudgetFormatTest, KvpressRatiosGiveBackEveryBudgetAtManyContextLengths) {
  // Exhaustive over small contexts: 1 - t/Lc is rounded twice, and for some (t, Lc) the plain
  // formula keeps one token too few in kvpress's own arithmetic.
  for (int64_t context_len = 1; context_len <= 700; ++context_len) {
    for (int64_t t = 1; t <= context_len; ++t) {
      BudgetMap map;
      map.options = Options(1.0, t);
      map.total_tokens = t;
      map.tokens = {t};
      map.multipliers = {1.0};
      map.normalized = {0.0};
      StatusOr<std::vector<double>> ratios = KvpressCompressionRatios(map, context_len);
      ASSERT_TRUE(ratios.ok()) << ratios.status();
      ASSERT_EQ(KvpressKept(context_len, (*ratios)[0]), t) << "t=" << t << " Lc=" << context_len;
      ASSERT_GE((*ratios)[0], 0.0);
      ASSERT_LT((*ratios)[0], 1.0);
    }
  }
}

TEST(BudgetFormatTest, KvpressNeedsAContextLengthThatHoldsEveryBudget) {
  const BudgetMap map = ThreeLayerMap();
  StatusOr<std::string> no_len = FormatBudgetMap(map, BudgetFormat::kKvpress, std::nullopt);
  EXPECT_THAT(no_len.status().message(), HasSubstr("context length is required"));
  StatusOr<std::string> short_len = FormatBudgetMap(map, BudgetFormat::kKvpress, 100);
  EXPECT_THAT(short_len.status().message(),
              HasSubstr("layer 1 keeps 182 tokens, more than the context length 100"));
  EXPECT_FALSE(FormatBudgetMap(map, BudgetFormat::kKvpress, 0).ok());
}

TEST(BudgetFormatTest, TrtllmListsTheTokenBudgetsAsAttentionWindows) {
  StatusOr<std::string> text =
      FormatBudgetMap(ThreeLayerMap(), BudgetFormat::kTrtllm, std::nullopt);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"max_attention_window": [46, 182, 72]})"));
}

TEST(BudgetFormatTest, NativeJsonRoundTripsExactly) {
  BudgetMap map = ThreeLayerMap();
  map.options.max_tokens = 190;
  map.options.max_context = 4096;
  StatusOr<std::string> text = BudgetMapToJson(map);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["model_hash"], "ab12");
  EXPECT_EQ(j["total_tokens"], 300);
  EXPECT_EQ(j["params"]["normalization"], "minmax");
  EXPECT_EQ(j["layers"][1], nlohmann::json::parse(
                                R"({"layer": 1, "tokens": 182, "multiplier": 4.0,
                                    "normalized": 1.0})"));
  StatusOr<BudgetMap> back = BudgetMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_hash, map.model_hash);
  EXPECT_EQ(back->tokens, map.tokens);
  EXPECT_EQ(back->multipliers, map.multipliers);  // bit-exact doubles
  EXPECT_EQ(back->normalized, map.normalized);
  EXPECT_EQ(back->options.ratio, map.options.ratio);
  EXPECT_EQ(back->options.max_tokens, map.options.max_tokens);
  EXPECT_EQ(back->options.max_context, map.options.max_context);
  EXPECT_EQ(back->options.average_tokens, map.options.average_tokens);
  EXPECT_EQ(back->options.total_tokens, std::nullopt);
  EXPECT_EQ(*BudgetMapToJson(*back), *text);
}

TEST(BudgetFormatTest, NativeJsonRejectsTamperedMaps) {
  const std::string text = *BudgetMapToJson(ThreeLayerMap());
  auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(text);
    edit(j);
    StatusOr<BudgetMap> map = BudgetMapFromJson(j.dump());
    EXPECT_FALSE(map.ok());
    return std::string(map.status().message());
  };
  EXPECT_THAT(error([](nlohmann::json& j) { j["layers"][0]["tokens"] = 47; }),
              HasSubstr("budgets sum to 301, not total_tokens 300"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["layers"][2]["tokens"] = "72"; }),
              HasSubstr("layers[2].tokens: expected an integer, got string"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["layers"][1]["layer"] = 2; }),
              HasSubstr("layers[1].layer: is 2, expected 1"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["params"].erase("ratio"); }),
              HasSubstr("params.ratio: missing"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["params"]["ratio"] = 0.5; }),
              HasSubstr("ratio must be finite and >= 1"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["layers"][0]["multiplier"] = 9.0; }),
              HasSubstr("layers[0].multiplier: 9 is outside [1, ratio 4]"));
  EXPECT_THAT(error([](nlohmann::json& j) { j["extra"] = 1; }), HasSubstr("extra: unknown field"));
  StatusOr<BudgetMap> v3 = BudgetMapFromJson(R"({"schema_version": 3})");
  EXPECT_EQ(v3.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Found with tests/fuzz/budget_map_json_fuzz (UBSan: signed overflow in ValidateBudgetMap): with
// no max_tokens / max_context, four budgets of about 2^62 wrapped the int64 sum around to the
// total (2^64 + 8 == 8), so an absurd map was accepted as valid.
TEST(BudgetFormatTest, NativeJsonRejectsBudgetsWhoseSumWrapsAround) {
  BudgetMap map;
  map.options.ratio = 1.0;
  map.options.total_tokens = 8;
  map.total_tokens = 8;
  const int64_t quarter = int64_t{1} << 62;
  map.tokens = {quarter + 5, quarter + 1, quarter + 1, quarter + 1};
  map.multipliers.assign(4, 1.0);
  map.normalized.assign(4, 0.0);
  Status status = ValidateBudgetMap(map);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("layers[0].tokens: 4611686018427387909 is above "
                                          "total_tokens 8"));
  map.tokens = {5, 1, 1, 1};
  EXPECT_TRUE(ValidateBudgetMap(map).ok()) << ValidateBudgetMap(map);
}

TEST(BudgetFormatTest, FormatNamesRoundTrip) {
  for (BudgetFormat f : {BudgetFormat::kNative, BudgetFormat::kKvpress, BudgetFormat::kTrtllm}) {
    EXPECT_EQ(*ParseBudgetFormat(BudgetFormatName(f)), f);
  }
  EXPECT_FALSE(ParseBudgetFormat("vllm").ok());
}

}  // namespace
}  // namespace ripplekv::method
