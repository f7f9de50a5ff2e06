// Calibration trials on the real SmolLM2-135M-Instruct GGUF (label `model`): the fast path equals
// the naive reference in both modes, at small settings.

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "worker/calibration/sample_calibrator.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

TEST(SmolLM2CalibrationTest, FastPathEqualsNaiveInBothModes) {
  const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto t = Transformer::Create(*model, {.num_threads = 2});
  ASSERT_TRUE(t.ok());
  // Arbitrary but fixed token ids (prose-like ids from the low vocabulary range).
  std::vector<int32_t> context(96), probe(8);
  for (int i = 0; i < 96; ++i) context[i] = 300 + (i * 7919) % 20000;
  for (int i = 0; i < 8; ++i) probe[i] = 300 + (i * 104729) % 20000;
  const TrialOptions options{.alpha = 0.5f, .trials = 2, .seed = 11};
  for (PerturbMode mode : {PerturbMode::kCache, PerturbMode::kPrefill}) {
    auto cal = SampleCalibrator::Prepare(*t, 0, context, probe, mode);
    ASSERT_TRUE(cal.ok()) << cal.status();
    for (int layer : {0, 14, 29}) {
      auto fast = (*cal)->RunLayer(layer, options);
      auto naive = (*cal)->RunLayerNaive(layer, options);
      ASSERT_TRUE(fast.ok() && naive.ok());
      for (int i = 0; i < 2; ++i) {
        std::printf("mode %s layer %2d trial %d: fast %.8g naive %.8g\n",
                    mode == PerturbMode::kCache ? "cache" : "prefill", layer, i, (*fast)[i],
                    (*naive)[i]);
        EXPECT_GT((*naive)[i], 0.0);
        EXPECT_NEAR((*fast)[i], (*naive)[i], 1e-4 * (*naive)[i]);
      }
    }
  }
}

}  // namespace
}  // namespace ripplekv::worker
