#include "method/profile_stability.h"

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/profile_aggregate.h"
#include "method/resampling.h"

namespace ripplekv::method {
namespace {

using ::testing::HasSubstr;

// A profile of per_sample[l][s] (one trial each), layers 0..L-1 of an L-layer model. With two or
// more samples AssembleProfile attaches the default stability block.
SensitivityProfile MakeProfile(const std::vector<std::vector<double>>& per_sample) {
  std::vector<TrialKl> results;
  for (size_t l = 0; l < per_sample.size(); ++l) {
    for (size_t s = 0; s < per_sample[l].size(); ++s) {
      results.push_back({.sample = static_cast<int64_t>(s),
                         .layer = static_cast<int64_t>(l),
                         .trial = 0,
                         .kl = per_sample[l][s]});
    }
  }
  const ProfileModel model{.hash = "abc",
                           .architecture = "llama",
                           .n_layers = static_cast<int64_t>(per_sample.size()),
                           .n_kv_heads = 1,
                           .head_dim = 8,
                           .d_model = 8,
                           .vocab_size = 16};
  const ProfileParams params{{.alpha = 0.5,
                              .trials = 1,
                              .samples = static_cast<int64_t>(per_sample[0].size()),
                              .context_len = 8,
                              .probe_len = 2},
                             "test"};
  StatusOr<SensitivityProfile> p = AssembleProfile(model, params, results, "2026-01-01T00:00:00Z");
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

// Deterministic pseudo-random doubles in [0, 1) from a seeded mt19937_64 (53 high bits).
std::vector<double> Uniforms(uint64_t seed, size_t n) {
  std::mt19937_64 engine(seed);
  std::vector<double> u(n);
  for (double& v : u) v = static_cast<double>(engine() >> 11) * 0x1p-53;
  return u;
}

// Layer l has mean (l + 1) * 0.01 and multiplicative noise of relative size `noise`.
std::vector<std::vector<double>> NoisyLayers(int layers, int samples, double noise, uint64_t seed) {
  std::vector<std::vector<double>> v(layers);
  for (int l = 0; l < layers; ++l) {
    const std::vector<double> u = Uniforms(seed * 1000 + l, samples);
    for (int s = 0; s < samples; ++s) {
      v[l].push_back((l + 1) * 0.01 * (1.0 + noise * (2.0 * u[s] - 1.0)));
    }
  }
  return v;
}

TEST(ProfileStabilityTest, NoiselessProfileHasPointIntervalsAndHandComputedShares) {
  // s = (0.1, 0.3): n = (0, 1), m = (1, 2) at ratio 2, shares = 2 * m / 3 = (2/3, 4/3).
  const SensitivityProfile p = MakeProfile({{0.1, 0.1, 0.1}, {0.3, 0.3, 0.3}});
  ASSERT_TRUE(p.stability.has_value());
  const ProfileStability& st = *p.stability;
  EXPECT_EQ(st.resamples, 1000);
  EXPECT_EQ(st.level, 0.9);
  EXPECT_EQ(st.ratio, 2.0);
  ASSERT_EQ(st.layers.size(), 2u);
  EXPECT_NEAR(st.layers[0].share, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(st.layers[1].share, 4.0 / 3.0, 1e-15);
  for (const LayerStability& l : st.layers) {
    EXPECT_EQ(l.share_low, l.share);
    EXPECT_EQ(l.share_high, l.share);
    EXPECT_EQ(l.kl_low, l.kl_high);
  }
  EXPECT_EQ(st.layers[1].kl_low, p.layers[1].mean_kl);
  EXPECT_EQ(st.max_share_deviation, 0.0);
  EXPECT_TRUE(st.stable);
  EXPECT_EQ(st.top_layer, 1);
  EXPECT_EQ(st.top_layer_frequency, 1.0);
  EXPECT_EQ(st.rank_correlation_median, 1.0);
  EXPECT_EQ(st.rank_correlation_low, 1.0);
}

TEST(ProfileStabilityTest, FlatProfileHasUnitSharesAndNoRankInformation) {
  const SensitivityProfile p = MakeProfile({{0.2, 0.2}, {0.2, 0.2}, {0.2, 0.2}});
  const ProfileStability& st = *p.stability;
  for (const LayerStability& l : st.layers) EXPECT_EQ(l.share, 1.0);
  EXPECT_EQ(st.rank_correlation_median, 0.0);  // constant ranks carry no correlation
  EXPECT_EQ(st.top_layer, 0);                  // ties go to the lower layer
  EXPECT_TRUE(st.stable);
}

TEST(ProfileStabilityTest, MatchesADirectBootstrapOfOneLayer) {
  const SensitivityProfile p = MakeProfile(NoisyLayers(3, 6, 0.5, 3));
  StatusOr<ProfileStability> st = ComputeStability(p, {.seed = 11, .resamples = 200});
  ASSERT_TRUE(st.ok()) << st.status();
  // The contract: replicate r draws all n indices first, then every layer averages them.
  BootstrapDraw draw(11);
  std::vector<double> means;
  for (int r = 0; r < 200; ++r) {
    std::vector<uint64_t> picks(6);
    for (uint64_t& k : picks) k = draw.Index(6);
    double sum = 0.0;
    for (uint64_t k : picks) sum += p.layers[2].per_sample_mean[k];
    means.push_back(sum / 6.0);
  }
  std::sort(means.begin(), means.end());
  EXPECT_EQ(std::bit_cast<uint64_t>(st->layers[2].kl_low),
            std::bit_cast<uint64_t>(SortedQuantile(means, 0.05)));
  EXPECT_EQ(std::bit_cast<uint64_t>(st->layers[2].kl_high),
            std::bit_cast<uint64_t>(SortedQuantile(means, 0.95)));
  EXPECT_LE(st->layers[2].kl_low, p.layers[2].mean_kl);
  EXPECT_GE(st->layers[2].kl_high, p.layers[2].mean_kl);
}

TEST(ProfileStabilityTest, DeterministicPerSeed) {
  const SensitivityProfile p = MakeProfile(NoisyLayers(4, 8, 0.8, 5));
  StatusOr<ProfileStability> a = ComputeStability(p, {.seed = 1});
  StatusOr<ProfileStability> b = ComputeStability(p, {.seed = 1});
  StatusOr<ProfileStability> c = ComputeStability(p, {.seed = 2});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t l = 0; l < a->layers.size(); ++l) {
    EXPECT_EQ(std::bit_cast<uint64_t>(a->layers[l].share_low),
              std::bit_cast<uint64_t>(b->layers[l].share_low));
  }
  EXPECT_NE(a->layers[3].share_low, c->layers[3].share_low);
}

TEST(ProfileStabilityTest, NoisyLayerIsUnstableAndMoreSamplesNarrowTheIntervals) {
  // +-90% noise on every layer: 8 samples cannot pin the shares to +-5%.
  const SensitivityProfile few = MakeProfile(NoisyLayers(4, 8, 0.9, 7));
  const SensitivityProfile many = MakeProfile(NoisyLayers(4, 512, 0.9, 7));
  ASSERT_TRUE(few.stability && many.stability);
  EXPECT_FALSE(few.stability->stable);
  EXPECT_GT(few.stability->max_share_deviation, 0.05);
  EXPECT_LT(many.stability->max_share_deviation, few.stability->max_share_deviation / 3.0);
  EXPECT_GE(many.stability->rank_correlation_median, few.stability->rank_correlation_median);
  // +-2% noise: stable at 8 samples, and the top layer (3, mean 0.04) never changes.
  const SensitivityProfile quiet = MakeProfile(NoisyLayers(4, 8, 0.02, 7));
  EXPECT_TRUE(quiet.stability->stable) << quiet.stability->max_share_deviation;
  EXPECT_EQ(quiet.stability->top_layer, 3);
  EXPECT_EQ(quiet.stability->top_layer_frequency, 1.0);
}

TEST(ProfileStabilityTest, OneSampleHasNothingToResample) {
  const SensitivityProfile p = MakeProfile({{0.1}, {0.2}});
  EXPECT_FALSE(p.stability.has_value());
  StatusOr<ProfileStability> st = ComputeStability(p);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.status().message(), HasSubstr("one sample"));
}

TEST(ProfileStabilityTest, RejectsOptionsOutOfRange) {
  const SensitivityProfile p = MakeProfile({{0.1, 0.2}, {0.2, 0.3}});
  EXPECT_FALSE(ComputeStability(p, {.resamples = 0}).ok());
  EXPECT_FALSE(ComputeStability(p, {.level = 1.0}).ok());
  EXPECT_FALSE(ComputeStability(p, {.ratio = 0.5}).ok());
  EXPECT_FALSE(ComputeStability(p, {.tolerance = -1.0}).ok());
}

TEST(ProfileStabilityTest, JsonRoundTripIsExactAndReadingIsStrict) {
  const SensitivityProfile p = MakeProfile(NoisyLayers(3, 8, 0.5, 9));
  StatusOr<std::string> json = ProfileToJson(p);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"stability\""));
  StatusOr<SensitivityProfile> back = ProfileFromJson(*json);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->stability.has_value());
  EXPECT_EQ(*ProfileToJson(*back), *json);

  SensitivityProfile lie = p;
  lie.stability->stable = !lie.stability->stable;
  StatusOr<std::string> bad = ProfileToJson(lie);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("stability.stable"));

  SensitivityProfile swapped = p;
  std::swap(swapped.stability->layers[0].share_low, swapped.stability->layers[0].share_high);
  if (swapped.stability->layers[0].share_low != swapped.stability->layers[0].share_high) {
    EXPECT_THAT(ProfileToJson(swapped).status().message(), HasSubstr("stability.layers[0]"));
  }

  std::string unknown = *json;
  unknown.replace(unknown.find("\"resamples\""), 11, "\"resample\"");
  StatusOr<SensitivityProfile> typo = ProfileFromJson(unknown);
  EXPECT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("stability"));

  // A profile written before the block existed still reads.
  SensitivityProfile old = p;
  old.stability.reset();
  StatusOr<std::string> old_json = ProfileToJson(old);
  ASSERT_TRUE(old_json.ok());
  EXPECT_EQ(old_json->find("stability"), std::string::npos);
  EXPECT_TRUE(ProfileFromJson(*old_json).ok());
}

TEST(ProfileStabilityTest, DataDomainIsOptionalInJson) {
  SensitivityProfile p = MakeProfile({{0.1, 0.2}, {0.2, 0.3}});
  EXPECT_EQ(ProfileToJson(p)->find("data_domain"), std::string::npos);
  p.params.data_domain = "mixed";
  StatusOr<SensitivityProfile> back = ProfileFromJson(*ProfileToJson(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params.data_domain, "mixed");
}

}  // namespace
}  // namespace ripplekv::method
