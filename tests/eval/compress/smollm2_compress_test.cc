// Compression on the real SmolLM2-135M-Instruct GGUF: a 512-token prompt from a public-domain
// book is prefilled, compressed, and a 32-token continuation is decoded teacher-forced at the
// true positions. The next-token distributions are compared with the uncompressed cache's
// (mean KL over the continuation). Label `model`: needs RIPPLEKV_SMOLLM2_GGUF.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>

#include "eval/compress/method.h"
#include "kernels/ops/softmax.h"
#include "worker/data/calibration_data.h"
#include "worker/engine/transformer.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {
namespace {

constexpr int kPrompt = 512;
constexpr int kDecode = 32;
constexpr int kOffset = 20000;  // tokens into the book: well inside the story

class SmolLM2CompressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr) return;
    auto model = worker::LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new worker::Model(std::move(model).value());
    auto t = worker::Transformer::Create(*model_, {.num_threads = 2});
    ASSERT_TRUE(t.ok());
    transformer_ = new worker::Transformer(std::move(t).value());
    auto file = worker::GgufFile::Open(path);
    ASSERT_TRUE(file.ok());
    auto tok = worker::TokenizerFromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    auto text = worker::ReadBuiltinCorpus(worker::kSherlockHolmes);
    ASSERT_TRUE(text.ok()) << text.status();
    tokens_ = new std::vector<int32_t>((*tok)->Encode(*text, {.add_special = false}));
    ASSERT_GE(tokens_->size(), static_cast<size_t>(kOffset + kPrompt + kDecode));
  }
  static void TearDownTestSuite() {
    delete tokens_;
    delete transformer_;
    delete model_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  }

  static std::span<const int32_t> Prompt() {
    return std::span<const int32_t>(*tokens_).subspan(kOffset, kPrompt);
  }
  static std::span<const int32_t> Continuation() {
    return std::span<const int32_t>(*tokens_).subspan(kOffset + kPrompt, kDecode);
  }

  // Logits [kDecode, vocab] of the continuation after compressing the prompt's cache with
  // `method` at average budget `average` (0 = no compression at all, plain Forward prefill).
  static kernels::Tensor DecodeAfter(std::string_view method_name, int average) {
    worker::KvCache cache(model_->config, kPrompt + kDecode);
    if (average == 0) {
      EXPECT_TRUE(
          transformer_->Forward({.tokens = Prompt(), .logits = worker::LogitRows::kNone}, cache)
              .ok());
    } else {
      const CompressOptions options;  // published defaults: window 32, max-pool 7, 4 sinks ...
      auto method = ParseMethod(method_name);
      EXPECT_TRUE(method.ok());
      auto prefill =
          PrefillObserved(*transformer_, Prompt(), ObserverOptionsFor(*method, options), cache);
      EXPECT_TRUE(prefill.ok()) << prefill.status();
      auto budgets = PlanBudgets(*method, average, prefill->layers, options);
      EXPECT_TRUE(budgets.ok()) << budgets.status();
      auto report = CompressCache(*method, *budgets, prefill->layers, options, cache);
      EXPECT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(report->total, int64_t{model_->config.n_layers} * std::min(average, kPrompt));
    }
    std::vector<int32_t> positions(kDecode);
    std::iota(positions.begin(), positions.end(), kPrompt);
    auto out = transformer_->Forward(
        {.tokens = Continuation(), .positions = positions, .logits = worker::LogitRows::kAll},
        cache);
    EXPECT_TRUE(out.ok()) << out.status();
    return std::move(out->logits);
  }

  static double MeanKl(const kernels::Tensor& p, const kernels::Tensor& q) {
    std::vector<float> kl(kDecode);
    EXPECT_TRUE(kernels::KlDivergenceRows(transformer_->op_context(), p.view(), q.view(), kl).ok());
    return std::accumulate(kl.begin(), kl.end(), 0.0) / kDecode;
  }

  static worker::Model* model_;
  static worker::Transformer* transformer_;
  static std::vector<int32_t>* tokens_;
};
worker::Model* SmolLM2CompressTest::model_ = nullptr;
worker::Transformer* SmolLM2CompressTest::transformer_ = nullptr;
std::vector<int32_t>* SmolLM2CompressTest::tokens_ = nullptr;

TEST_F(SmolLM2CompressTest, GenerousSnapKvStaysCloseToFullAndTinyStreamingMovesMore) {
  const kernels::Tensor full = DecodeAfter("full", 0);
  EXPECT_EQ(MeanKl(full, DecodeAfter("full", kPrompt)), 0.0) << "no-op compression is exact";
  const double snapkv = MeanKl(full, DecodeAfter("snapkv", kPrompt / 2));
  const double streaming = MeanKl(full, DecodeAfter("streaming", 16));
  std::fprintf(stderr, "mean KL vs full: snapkv@256 %.5f, streaming@16 %.5f nats\n", snapkv,
               streaming);
  EXPECT_LT(snapkv, streaming);
  EXPECT_LT(snapkv, 0.25) << "half the cache kept by SnapKV should barely move the output";
}

TEST_F(SmolLM2CompressTest, EveryMethodAtOneBudgetSpendsTheSameMemory) {
  const kernels::Tensor full = DecodeAfter("full", 0);
  std::map<std::string, double> kl;
  for (const char* name : {"uniform+snapkv", "pyramid+snapkv", "cake", "streaming", "h2o"}) {
    kl[name] = MeanKl(full, DecodeAfter(name, 128));  // totals checked inside DecodeAfter
    std::fprintf(stderr, "mean KL vs full at B=128: %-15s %.5f nats\n", name, kl[name]);
    EXPECT_GT(kl[name], 0.0) << name;  // a quarter of the cache does change the output
    EXPECT_LT(kl[name], 1.0) << name;  // but none of them breaks decoding
  }
}

}  // namespace
}  // namespace ripplekv::eval
