#include "worker/calibration/sample_calibrator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed) {
  return testing::RandomTokens(n, vocab, seed);
}

struct Fixture {
  Model model;
  std::unique_ptr<Transformer> transformer;
  std::vector<int32_t> context, probe;
};

Fixture MakeFixture(int threads = 1) {
  Fixture f;
  f.model = testing::MakeTinyModel({.n_layers = 4});
  auto t = Transformer::Create(f.model, {.num_threads = threads});
  f.transformer = std::make_unique<Transformer>(std::move(t).value());
  f.context = Tokens(48, f.model.config.vocab_size, 1);
  f.probe = Tokens(8, f.model.config.vocab_size, 2);
  return f;
}

std::unique_ptr<SampleCalibrator> Prepare(const Fixture& f, PerturbMode mode, int sample = 3) {
  auto s = SampleCalibrator::Prepare(*f.transformer, sample, f.context, f.probe, mode);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

class SampleCalibratorModeTest : public ::testing::TestWithParam<PerturbMode> {};

TEST_P(SampleCalibratorModeTest, FastPathEqualsNaiveReference) {
  const Fixture f = MakeFixture();
  const auto cal = Prepare(f, GetParam());
  const TrialOptions options{.alpha = 0.5f, .trials = 3, .seed = 42};
  for (int layer = 0; layer < 4; ++layer) {
    auto fast = cal->RunLayer(layer, options);
    auto naive = cal->RunLayerNaive(layer, options);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(naive.ok()) << naive.status();
    for (int t = 0; t < 3; ++t) {
      EXPECT_GT((*naive)[t], 1e-6) << "the perturbation must move the output";
      EXPECT_NEAR((*fast)[t], (*naive)[t], 1e-4 * (*naive)[t])
          << "layer " << layer << " trial " << t;
    }
  }
}

TEST_P(SampleCalibratorModeTest, ZeroAlphaGivesZeroKl) {
  const Fixture f = MakeFixture();
  const auto cal = Prepare(f, GetParam());
  for (int layer = 0; layer < 4; ++layer) {
    auto kl = cal->RunLayer(layer, {.alpha = 0.0f, .trials = 2});
    ASSERT_TRUE(kl.ok());
    // Zero up to GEMM rounding (the batched pass has other row counts than the clean pass).
    for (double v : *kl) EXPECT_LT(v, 1e-9) << "layer " << layer;
  }
}

TEST_P(SampleCalibratorModeTest, KlIsNonNegativeAndGrowsWithAlpha) {
  const Fixture f = MakeFixture();
  const auto cal = Prepare(f, GetParam());
  double previous = 0.0;
  for (float alpha : {0.05f, 0.2f, 0.8f}) {
    double total = 0.0;
    for (int layer = 0; layer < 4; ++layer) {
      auto kl = cal->RunLayer(layer, {.alpha = alpha, .trials = 4, .seed = 7});
      ASSERT_TRUE(kl.ok());
      for (double v : *kl) {
        EXPECT_GE(v, 0.0);
        total += v;
      }
    }
    EXPECT_GT(total, previous) << "alpha " << alpha;
    previous = total;
  }
}

TEST_P(SampleCalibratorModeTest, BitIdenticalAcrossRunsAndThreadCounts) {
  const TrialOptions options{.alpha = 0.3f, .trials = 2, .seed = 5};
  std::vector<double> results[3];
  for (int run = 0; run < 3; ++run) {
    const Fixture f = MakeFixture(run == 2 ? 2 : 1);
    const auto cal = Prepare(f, GetParam());
    for (int layer = 0; layer < 4; ++layer) {
      auto kl = cal->RunLayer(layer, options);
      ASSERT_TRUE(kl.ok());
      results[run].insert(results[run].end(), kl->begin(), kl->end());
    }
  }
  EXPECT_EQ(results[0], results[1]) << "same seed, same run";
  EXPECT_EQ(results[0], results[2]) << "1 vs 2 threads";
}

TEST_P(SampleCalibratorModeTest, SeedSampleAndTrialChangeTheNoise) {
  const Fixture f = MakeFixture();
  const auto a = Prepare(f, GetParam(), 0);
  const auto b = Prepare(f, GetParam(), 1);
  auto a1 = a->RunLayer(1, {.alpha = 0.3f, .trials = 2, .seed = 1});
  auto a2 = a->RunLayer(1, {.alpha = 0.3f, .trials = 2, .seed = 2});
  auto b1 = b->RunLayer(1, {.alpha = 0.3f, .trials = 2, .seed = 1});
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  EXPECT_NE((*a1)[0], (*a1)[1]) << "trials draw different noise";
  EXPECT_NE((*a1)[0], (*a2)[0]) << "seeds draw different noise";
  EXPECT_NE((*a1)[0], (*b1)[0]) << "samples draw different noise";
}

INSTANTIATE_TEST_SUITE_P(Modes, SampleCalibratorModeTest,
                         ::testing::Values(PerturbMode::kCache, PerturbMode::kPrefill),
                         [](const auto& info) {
                           return info.param == PerturbMode::kCache ? "Cache" : "Prefill";
                         });

TEST(SampleCalibratorTest, RejectsBadArguments) {
  const Fixture f = MakeFixture();
  const auto cal = Prepare(f, PerturbMode::kCache);
  EXPECT_EQ(cal->RunLayer(0, {.alpha = -0.1f}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cal->RunLayer(4, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cal->RunLayer(0, {.trials = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> empty;
  EXPECT_EQ(SampleCalibrator::Prepare(*f.transformer, 0, f.context, empty, PerturbMode::kCache)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
