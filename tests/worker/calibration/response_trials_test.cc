// Response trials (worker/calibration/sample_calibrator.h): one layer compressed by a selector to
// each budget of a grid, the probe pass resumed at that layer. The fast path is checked against
// the naive reference (a fresh prefill, KvCache::Retain on the one layer, a whole probe pass).
#include <gtest/gtest.h>

#include <random>

#include "method/calibration_params.h"
#include "tests/worker/engine/tiny_model.h"
#include "worker/calibration/sample_calibrator.h"

namespace ripplekv::worker {
namespace {

constexpr int kContext = 48;
constexpr int kProbe = 8;
constexpr int kLayers = 4;

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

struct Fixture {
  Model model;
  std::unique_ptr<Transformer> transformer;
  std::vector<int32_t> context, probe;
};

Fixture MakeFixture(int threads = 1) {
  Fixture f;
  f.model = testing::MakeTinyModel({.n_layers = kLayers, .n_heads = 4, .n_kv_heads = 2});
  auto t = Transformer::Create(f.model, {.num_threads = threads});
  f.transformer = std::make_unique<Transformer>(std::move(t).value());
  f.context = Tokens(kContext, f.model.config.vocab_size, 11);
  f.probe = Tokens(kProbe, f.model.config.vocab_size, 12);
  return f;
}

// The grid of each selector: budgets from its minimum up to the whole context.
TrialOptions ResponseOptions(SelectionKind selector) {
  ResponseTrials response{.selector = selector, .window = 16};
  switch (selector) {
    case SelectionKind::kSnapKv:
      response.budgets = {16, 24, 40, kContext};
      break;
    case SelectionKind::kH2o:
      response.budgets = {1, 8, 24, kContext};
      break;
    default:
      response.budgets = {4, 8, 24, kContext};
      break;
  }
  return {.trials = static_cast<int>(response.budgets.size()), .response = response};
}

std::unique_ptr<SampleCalibrator> Prepare(const Fixture& f, const TrialOptions& options) {
  auto s = SampleCalibrator::Prepare(*f.transformer, 0, f.context, f.probe, PerturbMode::kCache,
                                     ObserverOptionsFor(options));
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

class ResponseTrialsTest : public ::testing::TestWithParam<SelectionKind> {};

TEST_P(ResponseTrialsTest, FastPathEqualsNaiveReference) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(GetParam());
  const auto cal = Prepare(f, options);
  for (int layer = 0; layer < kLayers; ++layer) {
    auto fast = cal->RunLayer(layer, options);
    auto naive = cal->RunLayerNaive(layer, options);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(naive.ok()) << naive.status();
    ASSERT_EQ(fast->size(), options.response->budgets.size());
    for (size_t t = 0; t + 1 < fast->size(); ++t) {
      EXPECT_GT((*naive)[t], 1e-7) << "compressing layer " << layer << " must move the output";
      EXPECT_NEAR((*fast)[t], (*naive)[t], 1e-4 * (*naive)[t] + 1e-9)
          << "layer " << layer << " budget " << options.response->budgets[t];
    }
    // The whole context is the clean cache: 0 by definition, on both paths.
    EXPECT_EQ(fast->back(), 0.0);
    EXPECT_EQ(naive->back(), 0.0);
  }
}

TEST_P(ResponseTrialsTest, BitIdenticalAcrossRunsAndThreadCounts) {
  const TrialOptions options = ResponseOptions(GetParam());
  std::vector<double> reference;
  for (int threads : {1, 3}) {
    const Fixture f = MakeFixture(threads);
    const auto cal = Prepare(f, options);
    for (int run = 0; run < 2; ++run) {
      std::vector<double> all;
      for (int layer = 0; layer < kLayers; ++layer) {
        auto kl = cal->RunLayer(layer, options);
        ASSERT_TRUE(kl.ok()) << kl.status();
        all.insert(all.end(), kl->begin(), kl->end());
      }
      if (reference.empty()) reference = all;
      EXPECT_EQ(all, reference) << threads << " threads, run " << run;
    }
  }
}

TEST_P(ResponseTrialsTest, KeepingMoreOfTheContextLosesLessInTotal) {
  // Not a law for every layer and budget, but summed over layers the smallest budget must lose
  // more than the largest compressed one on this model (a broken selection would not).
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(GetParam());
  const auto cal = Prepare(f, options);
  double smallest = 0.0, largest = 0.0;
  for (int layer = 0; layer < kLayers; ++layer) {
    auto kl = cal->RunLayer(layer, options);
    ASSERT_TRUE(kl.ok());
    smallest += kl->front();
    largest += (*kl)[kl->size() - 2];
  }
  EXPECT_GT(smallest, largest);
}

INSTANTIATE_TEST_SUITE_P(Selectors, ResponseTrialsTest,
                         ::testing::Values(SelectionKind::kSnapKv, SelectionKind::kH2o,
                                           SelectionKind::kStreaming),
                         [](const auto& info) { return std::string(SelectionName(info.param)); });

TEST(ResponseTrialsTest, NeedsTheSelectorsStatistics) {
  const Fixture f = MakeFixture();
  const TrialOptions snapkv = ResponseOptions(SelectionKind::kSnapKv);
  const TrialOptions h2o = ResponseOptions(SelectionKind::kH2o);
  // Prepared for noise trials: no statistics at all.
  auto plain =
      SampleCalibrator::Prepare(*f.transformer, 0, f.context, f.probe, PerturbMode::kCache);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->RunLayer(1, snapkv).status().code(), absl::StatusCode::kFailedPrecondition);
  // Prepared for SnapKV: H2O's accumulated attention is missing.
  const auto cal = Prepare(f, snapkv);
  EXPECT_EQ(cal->RunLayer(1, h2o).status().code(), absl::StatusCode::kFailedPrecondition);
  // A trial count that is not the grid's size.
  TrialOptions wrong = snapkv;
  wrong.trials = 2;
  EXPECT_EQ(cal->RunLayer(1, wrong).status().code(), absl::StatusCode::kInvalidArgument);
  // Statistics are recorded in cache mode only.
  EXPECT_EQ(SampleCalibrator::Prepare(*f.transformer, 0, f.context, f.probe, PerturbMode::kPrefill,
                                      ObserverOptionsFor(snapkv))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResponseTrialsTest, CompressedMapOfOneLayerIsThatLayersResponse) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(SelectionKind::kSnapKv);
  const auto cal = Prepare(f, options);
  const ResponseTrials& response = *options.response;
  auto one = cal->RunLayerNaive(2, options);
  ASSERT_TRUE(one.ok()) << one.status();
  std::vector<int> budgets(kLayers, kContext);
  budgets[2] = response.budgets[1];
  auto joint = cal->RunCompressedMap(budgets, response);
  ASSERT_TRUE(joint.ok()) << joint.status();
  EXPECT_EQ(*joint, (*one)[1]);
  // Every layer whole: the clean cache, KL 0 up to the rounding of a second prefill.
  auto none = cal->RunCompressedMap(std::vector<int>(kLayers, kContext), response);
  ASSERT_TRUE(none.ok());
  EXPECT_LT(*none, 1e-9);
  // Every layer compressed loses more than the one layer did.
  auto all = cal->RunCompressedMap(std::vector<int>(kLayers, response.budgets[1]), response);
  ASSERT_TRUE(all.ok());
  EXPECT_GT(*all, (*one)[1]);
  EXPECT_EQ(cal->RunCompressedMap(std::vector<int>(kLayers - 1, 16), response).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResponseTrialsTest, OptionsOfTheMethodsParameters) {
  method::CalibrationParams params;
  EXPECT_FALSE(TrialOptionsOf(params).response.has_value());
  EXPECT_FALSE(ObserverOptionsFor(TrialOptionsOf(params)).has_value());
  params.objective = method::Objective::kResponse;
  params.selector = method::ResponseSelector::kH2o;
  params.budgets = {16, 64, 512};
  params.trials = 3;
  const TrialOptions options = TrialOptionsOf(params);
  ASSERT_TRUE(options.response.has_value());
  EXPECT_EQ(options.response->selector, SelectionKind::kH2o);
  EXPECT_EQ(options.response->budgets, (std::vector<int>{16, 64, 512}));
  EXPECT_EQ(options.response->window, method::kResponseWindow);
  EXPECT_EQ(options.response->selection.sinks, method::kResponseSinks);
  const auto observe = ObserverOptionsFor(options);
  ASSERT_TRUE(observe.has_value());
  EXPECT_TRUE(observe->accumulated);
  EXPECT_FALSE(observe->window_stats);
  params.selector = method::ResponseSelector::kSnapKv;
  EXPECT_TRUE(ObserverOptionsFor(TrialOptionsOf(params))->window_stats);
}

}  // namespace
}  // namespace ripplekv::worker
