// The engine on the real SmolLM2-135M-Instruct GGUF against llama.cpp's own outputs on the same
// file (tests/fixtures/llamacpp/, made by scripts/make-fixtures; docs/CORRECTNESS.md explains the
// tolerances). Label `model`: needs RIPPLEKV_SMOLLM2_GGUF.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "nlohmann/json.hpp"
#include "kernels/ops/softmax.h"
#include "worker/engine/perplexity.h"
#include "worker/engine/transformer.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

// llama.cpp's CPU path multiplies quantized weights with activations quantized to 8 bits
// (Q8_1 blocks); our engine keeps activations in fp32. Measured against an exact fp64 forward on
// the same dequantized weights (scripts/make-fixtures --exact-check), llama.cpp's logits are off
// by up to 1.25 (mean 0.15-0.38 over the top-10 ids) and its argmax flips where its top-2 margin
// is below 0.26. The bounds below leave ~20% headroom over that; a real bug (RoPE pairing, mask
// off by one, wrong norm) moves logits by several units and flips confident argmaxes.
constexpr double kArgmaxMargin = 0.5;
constexpr double kMaxTop10AbsError = 1.5;   // logits, over llama.cpp's top-10 ids
constexpr double kMeanTop10AbsError = 0.25; // averaged over all positions and ids
constexpr double kMaxLseAbsError = 1.0;     // full-vocabulary log-sum-exp per position
// Perplexity: the bound against llama.cpp, and a tight one against the exact fp64
// reference (which our fp32 engine should reproduce to rounding).
constexpr double kPerplexityRelTol = 0.01;
constexpr double kExactPerplexityRelTol = 1e-4;

nlohmann::json ReadFixture(const std::string& name) {
  std::ifstream in(std::string(RIPPLEKV_FIXTURES_DIR) + "/llamacpp/" + name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

class SmolLM2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr) return;
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new Model(std::move(model).value());
    auto t = Transformer::Create(*model_, {.num_threads = 2});
    ASSERT_TRUE(t.ok());
    transformer_ = new Transformer(std::move(t).value());
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok());
    auto tok = TokenizerFromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete transformer_;
    delete model_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  }
  static Model* model_;
  static Transformer* transformer_;
  static Tokenizer* tokenizer_;
};
Model* SmolLM2Test::model_ = nullptr;
Transformer* SmolLM2Test::transformer_ = nullptr;
Tokenizer* SmolLM2Test::tokenizer_ = nullptr;

TEST_F(SmolLM2Test, LogitsAgreeWithLlamaCpp) {
  const nlohmann::json fixture = ReadFixture("logits.json");
  const int vocab = model_->config.vocab_size;
  double sum_err = 0, max_err = 0, max_lse_err = 0;
  int64_t n_err = 0, checked = 0, agreed = 0;
  for (const auto& prompt : fixture["prompts"]) {
    const std::vector<int32_t> ids = prompt["ids"].get<std::vector<int32_t>>();
    KvCache cache(model_->config, static_cast<int>(ids.size()));
    auto out = transformer_->Forward({.tokens = ids, .logits = LogitRows::kAll}, cache);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto& positions = prompt["positions"];
    ASSERT_EQ(positions.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const float* row = out->logits.data() + i * vocab;
      const auto& top = positions[i]["top"];
      for (const auto& entry : top) {
        const double err = std::abs(row[entry[0].get<int>()] - entry[1].get<double>());
        sum_err += err;
        max_err = std::max(max_err, err);
        ++n_err;
      }
      std::vector<float> lse(1);
      ASSERT_TRUE(kernels::LogSumExp({}, kernels::ConstTensorView(row, {1, vocab}), lse).ok());
      max_lse_err = std::max(max_lse_err, std::abs(lse[0] - positions[i]["lse"].get<double>()));
      const int ours = static_cast<int>(std::max_element(row, row + vocab) - row);
      if (positions[i]["margin"].get<double>() > kArgmaxMargin) {
        ++checked;
        agreed += ours == top[0][0].get<int>();
        EXPECT_EQ(ours, top[0][0].get<int>())
            << prompt["name"] << " position " << i << " (llama.cpp margin "
            << positions[i]["margin"] << ")";
      }
    }
  }
  std::printf("logits vs llama.cpp: %lld positions with margin > %.2f, %lld same argmax; "
              "top-10 abs error max %.4f mean %.4f; lse abs error max %.4f\n",
              static_cast<long long>(checked), kArgmaxMargin, static_cast<long long>(agreed),
              max_err, sum_err / n_err, max_lse_err);
  EXPECT_GT(checked, 100);
  EXPECT_LT(max_err, kMaxTop10AbsError);
  EXPECT_LT(sum_err / n_err, kMeanTop10AbsError);
  EXPECT_LT(max_lse_err, kMaxLseAbsError);
}

TEST_F(SmolLM2Test, PerplexityWithinOnePercentOfLlamaCpp) {
  const nlohmann::json fixture = ReadFixture("perplexity.json");
  std::ifstream in(fixture["text_path"].get<std::string>(), std::ios::binary);
  if (!in) GTEST_SKIP() << "text " << fixture["text_path"] << " not on this machine";
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (fixture["trailing_newline_stripped"].get<bool>() && !text.empty() && text.back() == '\n') {
    text.pop_back();
  }
  const std::vector<int32_t> tokens = tokenizer_->Encode(text, {.add_special = true});
  const auto expected_ids = fixture["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(tokens.size(), expected_ids.size());
  EXPECT_TRUE(tokens == expected_ids) << "tokenization of the perplexity text differs";

  for (const auto& run : fixture["runs"]) {
    const int n_ctx = run["n_ctx"].get<int>();
    auto r = ComputePerplexity(*transformer_, tokens,
                               {.n_ctx = n_ctx,
                                .bos_id = tokenizer_->add_bos() ? tokenizer_->bos_id() : -1});
    ASSERT_TRUE(r.ok()) << r.status();
    const double llama = run["ppl"].get<double>();
    ASSERT_EQ(r->n_chunks, run["n_chunks"].get<int>());
    std::printf("perplexity ctx %d, %d chunks: ours %.4f, llama.cpp %.4f (%+.3f%%)\n", n_ctx,
                r->n_chunks, r->ppl, llama, 100.0 * (r->ppl / llama - 1.0));
    EXPECT_NEAR(r->ppl, llama, kPerplexityRelTol * llama) << "n_ctx " << n_ctx;

    // The exact fp64 reference covers the first chunks only.
    const auto& exact = run["exact_fp32_first_chunks"];
    const int k = exact["n_chunks"].get<int>();
    double nll = 0;
    for (int c = 0; c < k; ++c) nll += r->chunk_nll_sum[c];
    const double ours_k = std::exp(nll / (static_cast<double>(k) * (n_ctx - 1 - n_ctx / 2)));
    const double exact_k = exact["ppl"].get<double>();
    std::printf("perplexity ctx %d, first %d chunks: ours %.6f, exact fp64 %.6f (%+.5f%%)\n",
                n_ctx, k, ours_k, exact_k, 100.0 * (ours_k / exact_k - 1.0));
    EXPECT_NEAR(ours_k, exact_k, kExactPerplexityRelTol * exact_k) << "n_ctx " << n_ctx;
  }
}

}  // namespace
}  // namespace ripplekv::worker
