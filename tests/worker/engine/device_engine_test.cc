// The whole engine on a CUDA device against the same engine on the CPU (label gpu): logits of a
// forward pass, the device KV cache's bookkeeping, greedy generation and a whole calibration task
// with its budget map, in the exactness mode (fp32 weights on the device) and the default mode
// (bf16 weights). The tiny model runs everywhere a GPU is; SmolLM2 when RIPPLEKV_SMOLLM2_GGUF is
// set. Without a device every case skips and says why.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/ops/devices.h"
#include "method/budget_map.h"
#include "tests/kernels/nmse.h"
#include "tests/worker/engine/tiny_model.h"
#include "worker/calibration/calibration_run.h"
#include "worker/engine/generator.h"
#include "worker/engine/transformer.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

using kernels::Device;
using kernels::DType;
using kernels::Nmse;

std::vector<int32_t> Tokens(int n, int vocab, int first) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (first + i * 7919) % vocab;
  return t;
}

class DeviceEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::DeviceCount(Device::kCuda) == 0) {
      GTEST_SKIP() << "no CUDA device: " << kernels::DeviceUnavailableReason(Device::kCuda);
    }
    auto session = kernels::DeviceSession::Open({Device::kCuda, 0}, 2);
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(std::move(*session));
  }
  // A Transformer over `model` on the CPU (device_weights ignored) or the device.
  std::unique_ptr<Transformer> Make(const Model& model, bool on_device, DType device_weights) {
    auto t = Transformer::Create(model, {.num_threads = 2,
                                         .device = on_device ? &*session_ : nullptr,
                                         .device_weights = device_weights});
    EXPECT_TRUE(t.ok()) << t.status();
    return std::make_unique<Transformer>(std::move(*t));
  }
  std::optional<kernels::DeviceSession> session_;
};

// The logits of a prefill of n tokens, on the host.
kernels::Tensor PrefillLogits(const Transformer& t, std::span<const int32_t> tokens) {
  KvCache cache = t.NewCache(static_cast<int>(tokens.size()));
  auto out = t.Forward({.tokens = tokens, .logits = LogitRows::kAll}, cache);
  EXPECT_TRUE(out.ok()) << out.status();
  return kernels::OnHost(std::move(out->logits));
}

TEST_F(DeviceEngineTest, ForwardLogitsMatchTheCpu) {
  const Model model = testing::MakeTinyModel({.n_layers = 3});
  const std::vector<int32_t> tokens = Tokens(37, model.config.vocab_size, 5);
  const kernels::Tensor want = PrefillLogits(*Make(model, false, DType::kF32), tokens);
  // fp32 on the device: the same arithmetic in another summation order.
  EXPECT_LE(Nmse(PrefillLogits(*Make(model, true, DType::kF32), tokens), want), 1e-10);
  // bf16 weights and GEMM inputs (8 significant bits) through three layers.
  EXPECT_LE(Nmse(PrefillLogits(*Make(model, true, DType::kBF16), tokens), want), 1e-3);
}

TEST_F(DeviceEngineTest, TheDeviceCacheKeepsItsPositionsOnTheHostToo) {
  const Model model = testing::MakeTinyModel({.n_layers = 2});
  const auto t = Make(model, true, DType::kF32);
  KvCache cache = t->NewCache(16);
  EXPECT_EQ(cache.op_context().device, Device::kCuda);
  const std::vector<int32_t> tokens = Tokens(10, model.config.vocab_size, 3);
  ASSERT_TRUE(t->Forward({.tokens = tokens, .logits = LogitRows::kNone}, cache).ok());
  EXPECT_EQ(cache.length(1), 10);
  EXPECT_EQ(cache.Position(1, 0, 9), 9);
  std::vector<std::vector<int32_t>> keep(model.config.n_kv_heads, {0, 4, 9});
  keep[1] = {1, 2, 3};
  ASSERT_TRUE(cache.Retain(1, keep).ok());
  EXPECT_EQ(cache.Position(1, 0, 1), 4);
  EXPECT_EQ(cache.Position(1, 1, 2), 3);
  std::vector<std::vector<int32_t>> bad(model.config.n_kv_heads, {2, 1, 0});
  EXPECT_EQ(cache.Retain(1, bad).code(), absl::StatusCode::kInvalidArgument);
  cache.TruncateFrom(5);
  EXPECT_EQ(cache.length(0), 5);
  // The positions the device holds are the host copy's.
  const kernels::KvCacheView view = cache.View(1);
  std::vector<int32_t> device_positions(static_cast<size_t>(view.n_kv_heads) * view.capacity);
  session_->allocator().CopyToHost(device_positions.data(), view.positions,
                                   device_positions.size() * sizeof(int32_t));
  for (int h = 0; h < view.n_kv_heads; ++h) {
    for (int i = 0; i < cache.length(1); ++i) {
      EXPECT_EQ(device_positions[static_cast<size_t>(h) * view.capacity + i],
                cache.Position(1, h, i));
    }
  }
}

// A whole calibration task (every layer, cache mode) on CPU and device: per-trial KL within 1e-5
// relative in fp32 mode; the budget maps at ratio 2 within one token per layer in both modes.
void ExpectCalibrationMatches(const std::unique_ptr<Transformer>& cpu,
                              const std::unique_ptr<Transformer>& device, double kl_tolerance,
                              int context, int probe) {
  const int vocab = cpu->config().vocab_size;
  const std::vector<CalibrationInput> samples = {
      {Tokens(context, vocab, 11), Tokens(probe, vocab, 13)},
      {Tokens(context, vocab, 17), Tokens(probe, vocab, 19)}};
  const CalibrationOptions options{.trials = {.alpha = 0.5f, .trials = 2, .seed = 7}};
  auto want = RunCalibration(*cpu, samples, options);
  auto got = RunCalibration(*device, samples, options);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  ASSERT_EQ(want->size(), got->size());
  const int layers = cpu->config().n_layers;
  std::vector<double> want_mean(layers), got_mean(layers);
  for (size_t i = 0; i < want->size(); ++i) {
    const double w = (*want)[i].kl, g = (*got)[i].kl;
    EXPECT_NEAR(g, w, kl_tolerance * w) << "layer " << (*want)[i].layer << " trial " << i;
    want_mean[(*want)[i].layer] += w;
    got_mean[(*got)[i].layer] += g;
  }
  const method::BudgetOptions budget{.ratio = 2.0, .average_tokens = 128};
  auto want_map = method::ComputeBudgetMap(want_mean, budget);
  auto got_map = method::ComputeBudgetMap(got_mean, budget);
  ASSERT_TRUE(want_map.ok() && got_map.ok());
  for (int l = 0; l < layers; ++l) {
    EXPECT_LE(std::abs(got_map->tokens[l] - want_map->tokens[l]), 1) << "layer " << l;
  }
}

TEST_F(DeviceEngineTest, ACalibrationTaskMatchesTheCpuOnTheTinyModel) {
  const Model model = testing::MakeTinyModel({.n_layers = 4});
  const auto cpu = Make(model, false, DType::kF32);
  ExpectCalibrationMatches(cpu, Make(model, true, DType::kF32), 1e-5, 48, 8);
}

// SmolLM2, when its GGUF is at hand: the fp32 mode within 1e-5 relative per trial; the bf16 mode
// within 5% per trial (bf16 weights move every logit by ~1e-3 relative; the KL of a small
// perturbation is a difference of nearby logits) and the same budget map within a token.
TEST_F(DeviceEngineTest, SmolLM2CalibrationAndGenerationMatchTheCpu) {
  const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto cpu = Make(*model, false, DType::kF32);
  const auto exact = Make(*model, true, DType::kF32);
  ExpectCalibrationMatches(cpu, exact, 1e-5, 128, 16);
  ExpectCalibrationMatches(cpu, Make(*model, true, DType::kBF16), 5e-2, 128, 16);
  // Greedy generation: the same 24 tokens in fp32 mode.
  const std::vector<int32_t> prompt = Tokens(20, model->config.vocab_size, 23);
  auto want = Generate(*cpu, prompt, {.max_new_tokens = 24});
  auto got = Generate(*exact, prompt, {.max_new_tokens = 24});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->tokens, want->tokens);
}

}  // namespace
}  // namespace ripplekv::worker
