// The whole engine on a CUDA device against the same engine on the CPU (label gpu): logits of a
// forward pass, the device KV cache's bookkeeping, greedy generation and a whole calibration task
// with its budget map, in the exactness mode (fp32 weights on the device) and the default mode
// (bf16 weights). The tiny model runs everywhere a GPU is; the cases on model files skip, saying
// so, without the variable that names their file:
// - RIPPLEKV_SMOLLM2_GGUF: SmolLM2 (scripts/fetch-model); a whole task in both modes, generation.
// - RIPPLEKV_DEVICE_SMALL_GGUF: any small GGUF, e.g. a synthetic one (ripplekv-make-model --shape
//   smollm2-135m --type q4_0); a whole task in fp32 mode.
// - RIPPLEKV_LLAMA3_8B_GGUF: a Llama-3-8B-shaped GGUF (ripplekv-make-model --shape llama3-8b
//   --type q4_0, 4.1 GB); one layer in fp32 mode (~32 GB of device memory).
// Without a device every case skips and says why.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <thread>
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
  // A Transformer over `model` on the CPU (device_weights ignored) or the device. Results do not
  // depend on num_threads.
  std::unique_ptr<Transformer> Make(const Model& model, bool on_device, DType device_weights,
                                    int num_threads = 2) {
    auto t = Transformer::Create(model, {.num_threads = num_threads,
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

// What a calibration comparison runs (cache mode), the same on both sides.
struct CalibrationCheck {
  int samples = 2;          // calibration samples
  int context = 48;         // context tokens per sample
  int probe = 8;            // probe tokens per sample
  int trials = 2;           // trials per (sample, layer)
  std::vector<int> layers;  // the layers measured; empty: every layer (a whole task)
};

// `check` on the CPU and on the device: every trial's KL within kl_tolerance relative (and above
// 0, so that the relative bound means something); for a whole task also the budget maps at ratio
// 2, within one token per layer.
void ExpectCalibrationMatches(const Transformer& cpu, const Transformer& device,
                              double kl_tolerance, const CalibrationCheck& check) {
  const int vocab = cpu.config().vocab_size;
  std::vector<CalibrationInput> samples;
  for (int i = 0; i < check.samples; ++i) {
    samples.push_back(
        {Tokens(check.context, vocab, 11 + 6 * i), Tokens(check.probe, vocab, 13 + 6 * i)});
  }
  const CalibrationOptions options{.trials = {.alpha = 0.5f, .trials = check.trials, .seed = 7},
                                   .layers = check.layers};
  auto want = RunCalibration(cpu, samples, options);
  auto got = RunCalibration(device, samples, options);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  const int layers = cpu.config().n_layers;
  const size_t measured = check.layers.empty() ? layers : check.layers.size();
  ASSERT_EQ(want->size(), check.samples * measured * check.trials);
  ASSERT_EQ(got->size(), want->size());
  std::vector<double> want_mean(layers), got_mean(layers);
  for (size_t i = 0; i < want->size(); ++i) {
    const double w = (*want)[i].kl, g = (*got)[i].kl;
    EXPECT_EQ((*got)[i].layer, (*want)[i].layer);
    EXPECT_GT(w, 0.0) << "layer " << (*want)[i].layer << " trial " << i;
    EXPECT_NEAR(g, w, kl_tolerance * w) << "layer " << (*want)[i].layer << " trial " << i;
    want_mean[(*want)[i].layer] += w;
    got_mean[(*got)[i].layer] += g;
  }
  if (!check.layers.empty()) return;  // a map of some layers means nothing
  const method::BudgetOptions budget{.ratio = 2.0, .average_tokens = 128};
  auto want_map = method::ComputeBudgetMap(want_mean, budget);
  auto got_map = method::ComputeBudgetMap(got_mean, budget);
  ASSERT_TRUE(want_map.ok() && got_map.ok());
  for (int l = 0; l < layers; ++l) {
    EXPECT_LE(std::abs(got_map->tokens[l] - want_map->tokens[l]), 1) << "layer " << l;
  }
}

// The per-trial KL tolerance of the fp32 mode against the CPU, as docs/DESIGN.md §3.1 states it:
// 1e-4 relative. Both sides compute in fp32 but sum in other orders (cuBLAS's GEMMs, the device's
// attention and reductions), and a KL is a function of small logit differences: a KL of ~1e-2
// comes from differences of ~1e-1, on which fp32 rounding of the logits (~1e-6) is ~1e-5
// relative, doubled in the KL. On the host emulation (tests/cuda_host) the tiny model's task
// differs by at most 1.1e-5; 1e-5 was too tight.
constexpr double kFp32KlTolerance = 1e-4;

TEST_F(DeviceEngineTest, ACalibrationTaskMatchesTheCpuOnTheTinyModel) {
  const Model model = testing::MakeTinyModel({.n_layers = 4});
  ExpectCalibrationMatches(*Make(model, false, DType::kF32), *Make(model, true, DType::kF32),
                           kFp32KlTolerance, {});
}

// The same on a small model file (RIPPLEKV_DEVICE_SMALL_GGUF), such as a synthetic one of a real
// shape, for a machine without SmolLM2: its stored weights (Q4_0, ...) decoded on the device as
// on the CPU. fp32 mode only: the bf16 mode's 5% is stated for SmolLM2's trained weights.
TEST_F(DeviceEngineTest, ACalibrationTaskMatchesTheCpuOnASmallModelFile) {
  const char* path = std::getenv("RIPPLEKV_DEVICE_SMALL_GGUF");
  if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_DEVICE_SMALL_GGUF not set";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectCalibrationMatches(*Make(*model, false, DType::kF32), *Make(*model, true, DType::kF32),
                           kFp32KlTolerance, {.context = 128, .probe = 16});
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
  const CalibrationCheck check{.context = 128, .probe = 16};
  ExpectCalibrationMatches(*cpu, *exact, kFp32KlTolerance, check);
  ExpectCalibrationMatches(*cpu, *Make(*model, true, DType::kBF16), 5e-2, check);
  // Greedy generation: the same 24 tokens in fp32 mode.
  const std::vector<int32_t> prompt = Tokens(20, model->config.vocab_size, 23);
  auto want = Generate(*cpu, prompt, {.max_new_tokens = 24});
  auto got = Generate(*exact, prompt, {.max_new_tokens = 24});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->tokens, want->tokens);
}

// One layer of a Llama-3-8B-shaped model (RIPPLEKV_LLAMA3_8B_GGUF; made by ripplekv-make-model
// --shape llama3-8b --type q4_0) in fp32 mode: the device holds the matrices as fp32 (~32 GB),
// the CPU reads the stored Q4_0 from the file's mapping (~4.1 GB of host memory). Layer 0, whose
// trials resume at the first layer and so run through all 32, on one sample with a short context:
// under a minute with loading on a 16-core host, most of it the CPU side.
TEST_F(DeviceEngineTest, OneLayerOfALlama3EightBShapeMatchesTheCpuInFp32) {
  const char* path = std::getenv("RIPPLEKV_LLAMA3_8B_GGUF");
  if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_LLAMA3_8B_GGUF not set";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  // A device too small for the fp32 copy fails here, naming the tensor (ResourceExhausted).
  auto device = Transformer::Create(
      *model, {.num_threads = 2, .device = &*session_, .device_weights = DType::kF32});
  ASSERT_TRUE(device.ok()) << device.status();
  const int threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  ExpectCalibrationMatches(*Make(*model, false, DType::kF32, threads), *device, kFp32KlTolerance,
                           {.samples = 1, .context = 64, .probe = 8, .trials = 2, .layers = {0}});
}

}  // namespace
}  // namespace ripplekv::worker
