// CalibrateUntilStable on the real SmolLM2-135M-Instruct GGUF (label `model`), at small settings:
// the rounds, the stopping rule, and that the final profile is bit for bit the profile of a plain
// calibration of the same samples.

#include "worker/calibration/until_stable.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "method/profile_aggregate.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

class UntilStableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<Model>(std::move(*model));
    auto t = Transformer::Create(*model_, {.num_threads = 1});
    ASSERT_TRUE(t.ok()) << t.status();
    transformer_ = std::make_unique<Transformer>(std::move(*t));
  }

  // Sample k: 48 context and 4 probe tokens of fixed, prose-like ids that depend on k, so the
  // first n are the same for every n.
  static StatusOr<std::vector<CalibrationInput>> Samples(int n) {
    if (n > 12) return absl::InvalidArgumentError("only 12 samples");
    std::vector<CalibrationInput> out(n);
    for (int k = 0; k < n; ++k) {
      for (int i = 0; i < 48; ++i) out[k].context.push_back(300 + (i * 7919 + k * 104729) % 20000);
      for (int i = 0; i < 4; ++i) out[k].probe.push_back(300 + (i * 611 + k * 7919) % 20000);
    }
    return out;
  }

  // Rounds of `samples` up to `max_samples`.
  ProfileContext Context(int64_t samples = 3, int64_t max_samples = 8) const {
    return {.model = ProfileModelOf(model_->config, "test-hash"),
            .params = {.alpha = 0.5,
                       .trials = 1,
                       .seed = 3,
                       .samples = samples,
                       .context_len = 48,
                       .probe_len = 4,
                       .until_stable = true,
                       .max_samples = max_samples},
            .created_at = "2026-01-01T00:00:00Z"};
  }

  CalibrationOptions Options() const {
    CalibrationOptions o;
    o.trials = {.alpha = 0.5f, .trials = 1, .seed = 3};
    o.layers = {0, 9, 18, 27};
    return o;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Transformer> transformer_;
};

TEST_F(UntilStableTest, RunsToTheCapAndEqualsAPlainCalibrationOfTheSameSamples) {
  // A tolerance of 0 is never met by real KL values: every round runs, up to the cap.
  const UntilStableOptions until{.stability = {.tolerance = 0.0}};
  StatusOr<UntilStableResult> r =
      CalibrateUntilStable(*transformer_, Samples, Options(), Context(3, 8), until);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rounds, (std::vector<int>{3, 6, 8}));
  EXPECT_TRUE(r->capped);
  ASSERT_TRUE(r->profile.stability.has_value());
  EXPECT_FALSE(r->profile.stability->stable);

  auto all = Samples(8);
  StatusOr<std::vector<TrialKl>> direct = RunCalibration(*transformer_, *all, Options());
  ASSERT_TRUE(direct.ok()) << direct.status();
  StatusOr<method::SensitivityProfile> plain =
      method::AssembleProfile(Context().model, method::MeasuredParams(Context().params, 8, "", ""),
                              *direct, Context().created_at);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->layers.size(), r->profile.layers.size());
  for (size_t l = 0; l < plain->layers.size(); ++l) {
    EXPECT_EQ(plain->layers[l].per_sample_mean, r->profile.layers[l].per_sample_mean) << l;
    EXPECT_EQ(plain->layers[l].mean_kl, r->profile.layers[l].mean_kl) << l;
  }
}

TEST_F(UntilStableTest, StopsAtTheFirstStableRound) {
  // A tolerance of 1000% is met at once.
  const UntilStableOptions until{.stability = {.tolerance = 10.0}};
  StatusOr<UntilStableResult> r =
      CalibrateUntilStable(*transformer_, Samples, Options(), Context(2, 8), until);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rounds, (std::vector<int>{2}));
  EXPECT_FALSE(r->capped);
  EXPECT_TRUE(r->profile.stability->stable);
  EXPECT_EQ(r->profile.params.samples, 2);
}

TEST_F(UntilStableTest, ASourceThatRunsOutIsAnErrorNamingTheSamplesReached) {
  const UntilStableOptions until{.stability = {.tolerance = 0.0}};
  StatusOr<UntilStableResult> r =
      CalibrateUntilStable(*transformer_, Samples, Options(), Context(6, 20), until);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("after 12 samples"), std::string::npos) << r.status();
}

TEST_F(UntilStableTest, RejectsRoundsBelowTwoAndACapBelowTheFirstRound) {
  auto no_samples = [](int) -> StatusOr<std::vector<CalibrationInput>> {
    return absl::InternalError("not called");
  };
  // The rules and messages of method/calibration_params.h.
  EXPECT_EQ(CalibrateUntilStable(*transformer_, no_samples, Options(), Context(1, 8), {})
                .status()
                .message(),
            "params.samples: until_stable needs rounds of at least 2 samples, got 1");
  EXPECT_EQ(CalibrateUntilStable(*transformer_, no_samples, Options(), Context(8, 4), {})
                .status()
                .message(),
            "params.max_samples: must be >= params.samples (8), got 4");
}

}  // namespace
}  // namespace ripplekv::worker
