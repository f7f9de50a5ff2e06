#include "bench/model/synthetic_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"
#include "worker/model/gguf_model_loader.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::bench {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

class SyntheticModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "ripplekv_synthetic_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `shape` with the overrides; fails the test on error.
  std::string Write(const std::string& name, std::string_view shape, int layers, int vocab,
                    GgmlType type = GgmlType::kQ4_0, uint64_t seed = 0, int threads = 0,
                    int64_t chunk_bytes = 1 << 20) {
    auto s = FindSyntheticShape(shape);
    EXPECT_TRUE(s.ok()) << s.status();
    SyntheticModelOptions o;
    o.shape = *s;
    o.n_layers = layers;
    o.vocab_size = vocab;
    o.type = type;
    o.seed = seed;
    o.num_threads = threads;
    o.sync = false;
    o.chunk_bytes = chunk_bytes;  // default 1 MiB: several chunks per large tensor
    auto stats = WriteSyntheticModel(Path(name), o);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (stats.ok()) {
      EXPECT_EQ(stats->file_bytes, std::filesystem::file_size(Path(name)));
      EXPECT_EQ(stats->n_layers, layers);
      EXPECT_EQ(stats->vocab_size, vocab);
    }
    return Path(name);
  }

  std::string dir_;
};

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool AllFinite(const kernels::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(t.data()[i])) return false;
  }
  return true;
}

float MaxAbs(const kernels::Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.data()[i]));
  return m;
}

// The published configs the shapes must copy.
TEST(SyntheticShapeTest, ShapesAreThePublishedConfigs) {
  struct Want {
    std::string_view name, arch;
    int layers, d, ff, heads, kv, vocab;
    float theta, eps;
    bool bias, tied, llama3;
  };
  const Want wants[] = {
      {"llama3-8b", "llama", 32, 4096, 14336, 32, 8, 128256, 500000, 1e-5f, false, false, true},
      {"llama3-70b", "llama", 80, 8192, 28672, 64, 8, 128256, 500000, 1e-5f, false, false, true},
      {"qwen2-7b", "qwen2", 28, 3584, 18944, 28, 4, 152064, 1e6f, 1e-6f, true, false, false},
      {"mistral-7b", "llama", 32, 4096, 14336, 32, 8, 32000, 10000, 1e-5f, false, false, false},
      {"smollm2-135m", "llama", 30, 576, 1536, 9, 3, 49152, 100000, 1e-5f, false, true, false},
  };
  ASSERT_EQ(SyntheticShapes().size(), std::size(wants));
  for (const Want& w : wants) {
    auto s = FindSyntheticShape(w.name);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->architecture, w.arch) << w.name;
    EXPECT_EQ(s->n_layers, w.layers) << w.name;
    EXPECT_EQ(s->d_model, w.d) << w.name;
    EXPECT_EQ(s->d_ff, w.ff) << w.name;
    EXPECT_EQ(s->n_heads, w.heads) << w.name;
    EXPECT_EQ(s->n_kv_heads, w.kv) << w.name;
    EXPECT_EQ(s->vocab_size, w.vocab) << w.name;
    EXPECT_EQ(s->rope_theta, w.theta) << w.name;
    EXPECT_EQ(s->rms_eps, w.eps) << w.name;
    EXPECT_EQ(s->qkv_bias, w.bias) << w.name;
    EXPECT_EQ(s->tied_embeddings, w.tied) << w.name;
    EXPECT_EQ(s->llama3_rope, w.llama3) << w.name;
  }
  const Status unknown = FindSyntheticShape("gpt-5").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("smollm2-135m"));
}

// Loads the file, checks the config against the shape, builds the tokenizer and runs a prefill
// of 16 tokens recording every layer's input: everything finite and of moderate size.
void CheckModel(const std::string& path, const SyntheticShape& shape, int layers, int vocab) {
  auto file = worker::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = worker::ReadGgufConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, shape.architecture);
  EXPECT_EQ(config->n_layers, layers);
  EXPECT_EQ(config->d_model, shape.d_model);
  EXPECT_EQ(config->d_ff, shape.d_ff);
  EXPECT_EQ(config->n_heads, shape.n_heads);
  EXPECT_EQ(config->n_kv_heads, shape.n_kv_heads);
  EXPECT_EQ(config->head_dim, shape.d_model / shape.n_heads);
  EXPECT_EQ(config->vocab_size, vocab);
  EXPECT_EQ(config->context_length, shape.context_length);
  EXPECT_EQ(config->rms_eps, shape.rms_eps);
  EXPECT_EQ(config->rope_theta, shape.rope_theta);
  EXPECT_EQ(config->qkv_bias, shape.qkv_bias);
  EXPECT_EQ(config->tied_embeddings, shape.tied_embeddings);
  EXPECT_EQ(*(*file)->GetString("ripplekv.synthetic.shape"), shape.name);

  auto tokenizer = worker::TokenizerFromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), vocab);
  EXPECT_EQ((*tokenizer)->bos_id(), shape.bos);
  EXPECT_EQ((*tokenizer)->eos_id(), shape.eos);
  EXPECT_EQ((*tokenizer)->add_bos(), shape.add_bos);
  const std::string text = "Synthetic weights, real shapes: caf\xC3\xA9 42!";
  std::vector<int32_t> ids = (*tokenizer)->Encode(text, {.add_special = false});
  EXPECT_EQ(ids.size(), text.size());  // no merges: one token per byte
  EXPECT_EQ((*tokenizer)->Decode(ids), text);
  ids.resize(16, static_cast<int32_t>(shape.specials.size()) + 'x');
  for (int32_t id : ids) ASSERT_LT(id, vocab);

  auto model = worker::LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->config.n_layers, layers);
  EXPECT_EQ(model->rope_freq_factors.numel() > 0, shape.llama3_rope);
  auto transformer = worker::Transformer::Create(*model, {.num_threads = 2});
  ASSERT_TRUE(transformer.ok()) << transformer.status();
  worker::KvCache cache(model->config, 16);
  std::vector<int32_t> rows(16);
  std::iota(rows.begin(), rows.end(), 0);
  worker::ForwardRequest request;
  request.tokens = ids;
  request.logits = worker::LogitRows::kAll;
  request.record_rows = rows;
  auto result = transformer->Forward(request, cache);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->layer_inputs.size(), static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    const kernels::Tensor& x = result->layer_inputs[l];
    ASSERT_TRUE(AllFinite(x)) << "layer " << l;
    EXPECT_LT(MaxAbs(x), 50.0f) << "layer " << l << ": activations grow";
  }
  if (layers > 1) {  // the layers do something: the residual stream grows from the embedding
    EXPECT_GT(MaxAbs(result->layer_inputs.back()), 2 * MaxAbs(result->layer_inputs.front()));
  }
  ASSERT_EQ(result->logits.shape(), (kernels::Shape{16, vocab}));
  EXPECT_TRUE(AllFinite(result->logits));
  EXPECT_GT(MaxAbs(result->logits), 0.1f);  // not degenerate
  EXPECT_LT(MaxAbs(result->logits), 50.0f);
}

TEST_F(SyntheticModelTest, SmolLM2AllLayersLoadsAndRunsFinite) {
  const SyntheticShape shape = *FindSyntheticShape("smollm2-135m");
  CheckModel(Write("smol.gguf", "smollm2-135m", 30, 512), shape, 30, 512);
}

TEST_F(SyntheticModelTest, EveryWritableTypeLoads) {
  const SyntheticShape shape = *FindSyntheticShape("smollm2-135m");
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    SCOPED_TRACE(kernels::TraitsOf(type).name);
    const std::string path = Write("t.gguf", "smollm2-135m", 2, 300, type);
    auto summary = worker::DescribeModel(path);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->tensor_types.at(std::string(kernels::TraitsOf(type).name)),
              type == GgmlType::kF32 ? 2 * 9 + 1 + 1 : 2 * 7 + 1);
    CheckModel(path, shape, 2, 300);
  }
}

TEST_F(SyntheticModelTest, Qwen2HasBiasesAndLoads) {
  const SyntheticShape shape = *FindSyntheticShape("qwen2-7b");
  const std::string path = Write("qwen2.gguf", "qwen2-7b", 1, 1024);
  auto file = worker::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NE((*file)->FindTensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ((*file)->FindTensor("blk.0.attn_q.bias")->type, GgmlType::kF32);
  EXPECT_EQ((*file)->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ((*file)->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kQ4_0);
  CheckModel(path, shape, 1, 1024);
}

TEST_F(SyntheticModelTest, Llama3HasRopeFactorsAndLoads) {
  const SyntheticShape shape = *FindSyntheticShape("llama3-8b");
  CheckModel(Write("llama3.gguf", "llama3-8b", 1, 1024, GgmlType::kQ8_0), shape, 1, 1024);
}

TEST_F(SyntheticModelTest, MistralLoads) {
  const SyntheticShape shape = *FindSyntheticShape("mistral-7b");
  CheckModel(Write("mistral.gguf", "mistral-7b", 1, 512), shape, 1, 512);
}

TEST_F(SyntheticModelTest, FullVocabularyIsPaddedWithUnusedTokens) {
  const std::string path = Write("v.gguf", "smollm2-135m", 1, 49152);
  auto file = worker::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 49152u);
  EXPECT_EQ((*tokens)[0], "<|endoftext|>");
  EXPECT_EQ((*tokens)[3 + ' '], "\xC4\xA0");  // GPT-2's byte-to-unicode: space is U+0120
  EXPECT_EQ((*tokens)[3 + 'a'], "a");
  EXPECT_EQ((*tokens)[3 + 256], "<unused_0>");
  EXPECT_EQ(tokens->back(), "<unused_48892>");
  auto tokenizer = worker::TokenizerFromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 49152);
  EXPECT_EQ((*tokenizer)->TokenToPiece(3 + 'a'), "a");
}

TEST_F(SyntheticModelTest, SameSeedSameBytesWhateverTheThreadsAndChunks) {
  // One thread and 1 MiB chunks against two threads and 32 MiB chunks (where rows are
  // generated in parallel).
  const std::string a = Contents(Write("a.gguf", "qwen2-7b", 1, 512, GgmlType::kQ4_0, 7, 1));
  const std::string b =
      Contents(Write("b.gguf", "qwen2-7b", 1, 512, GgmlType::kQ4_0, 7, 2, int64_t{32} << 20));
  const std::string c = Contents(Write("c.gguf", "qwen2-7b", 1, 512, GgmlType::kQ4_0, 8, 2));
  ASSERT_GT(a.size(), 1000000u);
  EXPECT_TRUE(a == b) << "seed 7 gave different bytes with 1 and 2 threads";
  ASSERT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c) << "seeds 7 and 8 gave the same bytes";
}

TEST_F(SyntheticModelTest, RefusesBadOptions) {
  SyntheticModelOptions o;
  o.shape = *FindSyntheticShape("smollm2-135m");
  o.vocab_size = 258;
  Status s = WriteSyntheticModel(Path("x.gguf"), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("259 tokens"));
  o.vocab_size = 0;
  o.type = GgmlType::kQ4_1;
  s = WriteSyntheticModel(Path("x.gguf"), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("q4_1"));
  o.type = GgmlType::kQ4_0;
  o.n_layers = -1;
  EXPECT_EQ(WriteSyntheticModel(Path("x.gguf"), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(Path("x.gguf")));
  o.n_layers = 1;
  s = WriteSyntheticModel(Path("missing/x.gguf"), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

}  // namespace
}  // namespace ripplekv::bench
