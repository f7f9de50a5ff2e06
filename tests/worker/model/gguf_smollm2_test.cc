// Reads the real SmolLM2-135M-Instruct Q4_1 GGUF (label `model`). Needs RIPPLEKV_SMOLLM2_GGUF to
// point at the file; skips otherwise.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "worker/model/gguf_model_loader.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::worker {
namespace {

std::string ModelPath() {
  const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  return path == nullptr ? std::string() : std::string(path);
}

class GgufSmolLm2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ModelPath();
    if (path_.empty()) {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set; point it at "
                      "SmolLM2-135M-Instruct.Q4_1.gguf to run this test";
    }
    auto file = GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }

  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

int64_t CountNonFinite(const kernels::Tensor& t) {
  int64_t bad = 0;
  for (float v : t.span()) bad += std::isfinite(v) ? 0 : 1;
  return bad;
}

TEST_F(GgufSmolLm2Test, OpensAndReportsTokenizerKeys) {
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(*file_->GetString("general.architecture"), "llama");
  EXPECT_EQ(file_->GetStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  StatusOr<std::string> pre = file_->GetString("tokenizer.ggml.pre");
  StatusOr<bool> add_bos = file_->GetBool("tokenizer.ggml.add_bos_token");
  ASSERT_TRUE(pre.ok()) << pre.status();
  ASSERT_TRUE(add_bos.ok()) << add_bos.status();
  std::cout << "tokenizer.ggml.pre = " << *pre
            << ", tokenizer.ggml.add_bos_token = " << (*add_bos ? "true" : "false") << "\n";
  RecordProperty("tokenizer_ggml_pre", *pre);
  RecordProperty("tokenizer_ggml_add_bos_token", *add_bos ? "true" : "false");
  EXPECT_EQ(*pre, "smollm");
  EXPECT_FALSE(*add_bos);
}

TEST_F(GgufSmolLm2Test, ConfigMatchesTheModelCard) {
  StatusOr<ModelConfig> c = ReadGgufConfig(*file_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->n_layers, 30);
  EXPECT_EQ(c->d_model, 576);
  EXPECT_EQ(c->n_heads, 9);
  EXPECT_EQ(c->n_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->d_ff, 1536);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->context_length, 8192);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 100000.0f);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_FALSE(c->qkv_bias);
}

TEST_F(GgufSmolLm2Test, EveryDequantizedWeightIsFinite) {
  StatusOr<Model> m = LoadGgufModel(*file_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->tok_embeddings.shape(), (kernels::Shape{49152, 576}));
  EXPECT_TRUE(m->output.empty());
  EXPECT_EQ(CountNonFinite(m->tok_embeddings.Expand()), 0);
  EXPECT_EQ(CountNonFinite(m->output_norm), 0);
  ASSERT_EQ(m->layers.size(), 30u);
  for (size_t l = 0; l < m->layers.size(); ++l) {
    const LayerWeights& w = m->layers[l];
    EXPECT_EQ(CountNonFinite(w.attn_norm), 0) << "layer " << l;
    EXPECT_EQ(CountNonFinite(w.ffn_norm), 0) << "layer " << l;
    for (const kernels::Weight* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      EXPECT_EQ(CountNonFinite(t->Expand()), 0) << "layer " << l;
    }
  }
  EXPECT_EQ(m->layers[0].wq.shape(), (kernels::Shape{576, 576}));
  EXPECT_EQ(m->layers[0].wk.shape(), (kernels::Shape{192, 576}));
  EXPECT_EQ(m->layers[0].w_down.shape(), (kernels::Shape{576, 1536}));
  // Real weights are neither all zero nor absurdly large.
  double sum_sq = 0;
  const kernels::Tensor wq = m->layers[0].wq.Expand();
  for (float v : wq.span()) sum_sq += static_cast<double>(v) * v;
  const double rms = std::sqrt(sum_sq / static_cast<double>(wq.numel()));
  EXPECT_GT(rms, 1e-3);
  EXPECT_LT(rms, 1.0);
}

}  // namespace
}  // namespace ripplekv::worker
