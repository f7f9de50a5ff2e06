// Response trials (worker/calibration/sample_calibrator.h): one layer compressed by a selector to
// each budget of a grid, the probe pass resumed at that layer. The fast path is checked against
// the naive reference (a fresh prefill, KvCache::Retain on the one layer, a whole probe pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "method/calibration_params.h"
#include "tests/worker/engine/tiny_model.h"
#include "worker/calibration/sample_calibrator.h"
#include "worker/compress/prefill_observer.h"
#include "worker/compress/selection.h"

namespace ripplekv::worker {
namespace {

constexpr int kContext = 48;
constexpr int kProbe = 8;
constexpr int kLayers = 4;

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

// A per-head map with every head of layer l at layer_budgets[l].
std::vector<std::vector<int>> EqualHeads(const std::vector<int>& layer_budgets, int kv_heads) {
  std::vector<std::vector<int>> map;
  for (int b : layer_budgets) map.emplace_back(kv_heads, b);
  return map;
}

void ExpectClose(double actual, double expected, const std::string& what) {
  EXPECT_GT(expected, 1e-7) << what << ": compression must move the output";
  EXPECT_NEAR(actual, expected, 1e-4 * expected + 1e-9) << what;
}

// The probe's mean KL with every KV head h of layer l keeping map[l][h] entries, written apart
// from the calibrator: a fresh observed prefill, the selector's rows, then a whole probe pass in
// which each compressed layer's attention is recomputed by hand (double, query head by query
// head, over its KV head's kept entries and the probe's own keys), no masking, no compaction.
double NaiveHeadMapKl(const Fixture& f, const TrialOptions& options,
                      const std::vector<std::vector<int>>& map) {
  const Transformer& t = *f.transformer;
  const ModelConfig& cfg = f.model.config;
  const ResponseTrials& response = *options.response;
  const int hq = cfg.n_heads, hkv = cfg.n_kv_heads, hd = cfg.head_dim, vocab = cfg.vocab_size;
  // The clean probe logits.
  KvCache clean = t.NewCache(kContext + kProbe);
  EXPECT_TRUE(t.Forward({.tokens = f.context, .logits = LogitRows::kNone}, clean).ok());
  auto z0 = t.Forward({.tokens = f.probe, .logits = LogitRows::kAll}, clean);
  EXPECT_TRUE(z0.ok());
  // Which entries each head keeps.
  KvCache cache = t.NewCache(kContext + kProbe);
  auto pre = PrefillObserved(t, f.context, *ObserverOptionsFor(options), cache);
  EXPECT_TRUE(pre.ok());
  std::vector<std::vector<std::vector<bool>>> kept(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    kept[l].assign(hkv, std::vector<bool>(kContext, true));
    for (int h = 0; h < hkv; ++h) {
      if (map[l][h] >= kContext) continue;
      auto keep = SelectTokens(response.selector, pre->layers[l], map[l][h], response.selection);
      EXPECT_TRUE(keep.ok());
      std::fill(kept[l][h].begin(), kept[l][h].end(), false);
      for (int32_t i : (*keep)[h]) kept[l][h][i] = true;
    }
  }
  std::vector<int32_t> positions(kProbe);
  for (int i = 0; i < kProbe; ++i) positions[i] = kContext + i;
  auto x = t.Embed(f.probe);
  EXPECT_TRUE(x.ok());
  auto attend = [&](int j, const kernels::TensorView& q, kernels::Tensor& k, kernels::Tensor& v,
                    std::span<const int32_t> pos, const kernels::TensorView& out) -> Status {
    RETURN_IF_ERROR(t.AttendCached(j, q, k, v, pos, out, cache));  // appends the probe's keys
    const kernels::KvCacheView view = cache.View(j);
    for (int i = 0; i < kProbe; ++i) {
      for (int h = 0; h < hq; ++h) {
        const int g = h / (hq / hkv);
        const float* qi = q.data + (static_cast<int64_t>(i) * hq + h) * hd;
        std::vector<double> score;
        std::vector<int> entry;
        for (int e = 0; e <= kContext + i; ++e) {
          if (e < kContext && !kept[j][g][e]) continue;
          const float* ke = view.k + (static_cast<int64_t>(g) * view.capacity + e) * hd;
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += static_cast<double>(qi[d]) * ke[d];
          score.push_back(dot / std::sqrt(static_cast<double>(hd)));
          entry.push_back(e);
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double z = 0.0;
        for (double& sc : score) z += (sc = std::exp(sc - mx));
        float* o = out.data + (static_cast<int64_t>(i) * hq + h) * hd;
        for (int d = 0; d < hd; ++d) {
          double acc = 0.0;
          for (size_t n = 0; n < entry.size(); ++n) {
            acc += score[n] / z *
                   view.v[(static_cast<int64_t>(g) * view.capacity + entry[n]) * hd + d];
          }
          o[d] = static_cast<float>(acc);
        }
      }
    }
    return absl::OkStatus();
  };
  EXPECT_TRUE(t.RunLayers(*x, {.first = 0, .positions = positions}, attend).ok());
  auto logits = t.Logits(*x);
  EXPECT_TRUE(logits.ok());
  // Mean over probe rows of KL(softmax(z0) || softmax(z)), in double.
  auto log_softmax = [&](const float* row) {
    std::vector<double> out(row, row + vocab);
    const double mx = *std::max_element(out.begin(), out.end());
    double z = 0.0;
    for (double v : out) z += std::exp(v - mx);
    for (double& v : out) v = v - mx - std::log(z);
    return out;
  };
  double kl = 0.0;
  for (int i = 0; i < kProbe; ++i) {
    const std::vector<double> p = log_softmax(z0->logits.data() + static_cast<int64_t>(i) * vocab);
    const std::vector<double> r = log_softmax(logits->data() + static_cast<int64_t>(i) * vocab);
    for (int n = 0; n < vocab; ++n) kl += std::exp(p[n]) * (p[n] - r[n]);
  }
  return kl / kProbe;
}

class HeadResponseTest : public ::testing::TestWithParam<SelectionKind> {};

TEST_P(HeadResponseTest, EqualHeadsInOneLayerAreThatLayersResponse) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(GetParam());
  const ResponseTrials& response = *options.response;
  const auto cal = Prepare(f, options);
  const int heads = f.model.config.n_kv_heads;
  for (int layer : {0, 2}) {
    auto curve = cal->RunLayer(layer, options);
    ASSERT_TRUE(curve.ok()) << curve.status();
    for (size_t t = 0; t + 1 < response.budgets.size(); ++t) {
      std::vector<int> layers(kLayers, kContext);
      layers[layer] = response.budgets[t];
      auto joint = cal->RunHeadMap(EqualHeads(layers, heads), response);
      ASSERT_TRUE(joint.ok()) << joint.status();
      ExpectClose(*joint, (*curve)[t],
                  "layer " + std::to_string(layer) + " at " + std::to_string(response.budgets[t]));
    }
  }
}

TEST_P(HeadResponseTest, EqualHeadsEverywhereAreTheCompressedMap) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(GetParam());
  const ResponseTrials& response = *options.response;
  const auto cal = Prepare(f, options);
  for (size_t t = 0; t + 1 < response.budgets.size(); ++t) {
    const std::vector<int> layers(kLayers, response.budgets[t]);
    auto naive = cal->RunCompressedMap(layers, response);
    auto masked = cal->RunHeadMap(EqualHeads(layers, f.model.config.n_kv_heads), response);
    ASSERT_TRUE(naive.ok()) << naive.status();
    ASSERT_TRUE(masked.ok()) << masked.status();
    ExpectClose(*masked, *naive, "every layer at " + std::to_string(response.budgets[t]));
  }
}

TEST_P(HeadResponseTest, OneHeadOfTheMapIsThatHeadsResponse) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(GetParam());
  const ResponseTrials& response = *options.response;
  const auto cal = Prepare(f, options);
  const int heads = f.model.config.n_kv_heads;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int head = 0; head < heads; ++head) {
      auto curve = cal->RunHeadResponse(layer, head, response);
      ASSERT_TRUE(curve.ok()) << curve.status();
      ASSERT_EQ(curve->size(), response.budgets.size());
      // The whole context is the clean cache: 0 exactly, not run.
      EXPECT_EQ(curve->back(), 0.0);
      for (size_t t = 0; t + 1 < response.budgets.size(); ++t) {
        std::vector<std::vector<int>> map = EqualHeads(std::vector<int>(kLayers, kContext), heads);
        map[layer][head] = response.budgets[t];
        auto joint = cal->RunHeadMap(map, response);
        ASSERT_TRUE(joint.ok()) << joint.status();
        // The same masked copy resumed at the same layer, one trial instead of a batch of the
        // grid's (other GEMM shapes, so rounding differs).
        ExpectClose(*joint, (*curve)[t],
                    "layer " + std::to_string(layer) + " head " + std::to_string(head));
      }
    }
  }
}

TEST_P(HeadResponseTest, IdenticalAcrossThreadCounts) {
  const TrialOptions options = ResponseOptions(GetParam());
  std::vector<double> reference;
  for (int threads : {1, 3}) {
    const Fixture f = MakeFixture(threads);
    const auto cal = Prepare(f, options);
    auto kl = cal->RunHeadResponse(1, 1, *options.response);
    ASSERT_TRUE(kl.ok()) << kl.status();
    if (reference.empty()) reference = *kl;
    EXPECT_EQ(*kl, reference) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Selectors, HeadResponseTest,
                         ::testing::Values(SelectionKind::kSnapKv, SelectionKind::kH2o,
                                           SelectionKind::kStreaming),
                         [](const auto& info) { return std::string(SelectionName(info.param)); });

TEST(HeadResponseTest, MixedMapsEqualAnIndependentReference) {
  const Fixture f = MakeFixture();
  for (SelectionKind selector : {SelectionKind::kSnapKv, SelectionKind::kH2o}) {
    const TrialOptions options = ResponseOptions(selector);
    const ResponseTrials& response = *options.response;
    const auto cal = Prepare(f, options);
    const int low = response.budgets[0], mid = response.budgets[1], high = response.budgets[2];
    // Heads of one layer apart; then several layers, one head whole, one beyond the context.
    const std::vector<std::vector<std::vector<int>>> maps = {
        {{kContext, kContext}, {low, high}, {kContext, kContext}, {kContext, kContext}},
        {{mid, low}, {kContext, high}, {high, high}, {low, kContext + 5}},
    };
    for (const auto& map : maps) {
      auto masked = cal->RunHeadMap(map, response);
      ASSERT_TRUE(masked.ok()) << masked.status();
      ExpectClose(*masked, NaiveHeadMapKl(f, options, map), std::string(SelectionName(selector)));
    }
  }
}

TEST(HeadResponseTest, WholeBudgetsGiveZeroAndBadShapesAreRefused) {
  const Fixture f = MakeFixture();
  const TrialOptions options = ResponseOptions(SelectionKind::kSnapKv);
  const ResponseTrials& response = *options.response;
  const auto cal = Prepare(f, options);
  // Budgets at or beyond C keep every head whole: 0 exactly, nothing run.
  std::vector<std::vector<int>> whole = EqualHeads(std::vector<int>(kLayers, kContext), 2);
  whole[3][1] = kContext + 100;
  auto zero = cal->RunHeadMap(whole, response);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(*zero, 0.0);
  ResponseTrials beyond = response;
  beyond.budgets = {kContext, kContext + 1};
  auto curve = cal->RunHeadResponse(0, 0, beyond);
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_EQ(*curve, (std::vector<double>{0.0, 0.0}));

  const auto code = [&](std::vector<std::vector<int>> map) {
    return cal->RunHeadMap(map, response).status().code();
  };
  using absl::StatusCode;
  EXPECT_EQ(code(EqualHeads(std::vector<int>(kLayers - 1, 16), 2)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(EqualHeads(std::vector<int>(kLayers, 16), 3)), StatusCode::kInvalidArgument);
  std::vector<std::vector<int>> negative = whole;
  negative[0][0] = -1;
  EXPECT_EQ(code(negative), StatusCode::kInvalidArgument);
  EXPECT_EQ(cal->RunHeadResponse(kLayers, 0, response).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cal->RunHeadResponse(0, 2, response).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cal->RunHeadResponse(0, -1, response).status().code(), StatusCode::kInvalidArgument);
  // The selector's statistics are still required.
  const TrialOptions h2o = ResponseOptions(SelectionKind::kH2o);
  EXPECT_EQ(cal->RunHeadResponse(0, 0, *h2o.response).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<std::vector<int>> one = whole;
  one[0][0] = 8;
  EXPECT_EQ(cal->RunHeadMap(one, *h2o.response).status().code(), StatusCode::kFailedPrecondition);
}

// A per-head response's trials (params.kv_heads): RunLayer runs each head's RunHeadResponse in
// turn, head-major; RunLayerNaive one RunHeadMap per trial.
TEST(ResponseTrialsTest, PerHeadTrialsAreEachHeadsResponseInTurn) {
  const Fixture f = MakeFixture();
  const int heads = f.model.config.n_kv_heads;
  TrialOptions options = ResponseOptions(SelectionKind::kH2o);
  const ResponseTrials per_layer = *options.response;
  const size_t grid = per_layer.budgets.size();
  options.response->kv_heads = heads;
  options.trials = static_cast<int>(grid) * heads;
  const auto cal = Prepare(f, options);
  for (int layer : {0, kLayers - 1}) {
    auto fast = cal->RunLayer(layer, options);
    ASSERT_TRUE(fast.ok()) << fast.status();
    auto naive = cal->RunLayerNaive(layer, options);
    ASSERT_TRUE(naive.ok()) << naive.status();
    ASSERT_EQ(fast->size(), grid * heads);
    ASSERT_EQ(naive->size(), grid * heads);
    for (int h = 0; h < heads; ++h) {
      auto head = cal->RunHeadResponse(layer, h, per_layer);
      ASSERT_TRUE(head.ok()) << head.status();
      for (size_t g = 0; g < grid; ++g) {
        const size_t t = h * grid + g;
        EXPECT_EQ((*fast)[t], (*head)[g]) << "layer " << layer << " trial " << t;
        if (per_layer.budgets[g] >= kContext) {
          EXPECT_EQ((*naive)[t], 0.0);
          continue;
        }
        ExpectClose((*naive)[t], (*fast)[t],
                    "layer " + std::to_string(layer) + " trial " + std::to_string(t));
      }
    }
  }
}

TEST(ResponseTrialsTest, PerHeadTrialsNeedTheModelsHeadsAndTheirTrialCount) {
  const Fixture f = MakeFixture();
  TrialOptions options = ResponseOptions(SelectionKind::kSnapKv);
  const auto cal = Prepare(f, options);
  const int grid = static_cast<int>(options.response->budgets.size());
  options.response->kv_heads = 3;  // the model has 2
  options.trials = 3 * grid;
  StatusOr<std::vector<double>> kl = cal->RunLayer(0, options);
  EXPECT_EQ(kl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kl.status().message(), "params.kv_heads: 3, but the model has 2 KV heads");
  options.response->kv_heads = 2;
  options.trials = grid;  // one grid, not one per head
  kl = cal->RunLayer(0, options);
  EXPECT_EQ(kl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kl.status().message(), "response trials: " + std::to_string(grid) +
                                       " trials for a grid of " + std::to_string(grid) +
                                       " budgets x 2 KV heads");
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
  EXPECT_EQ(options.response->kv_heads, 0);
  params.kv_heads = 3;
  params.trials = 9;
  EXPECT_EQ(TrialOptionsOf(params).response->kv_heads, 3);
  EXPECT_EQ(TrialOptionsOf(params).trials, 9);
  params.selector = method::ResponseSelector::kSnapKv;
  EXPECT_TRUE(ObserverOptionsFor(TrialOptionsOf(params))->window_stats);
}

}  // namespace
}  // namespace ripplekv::worker
