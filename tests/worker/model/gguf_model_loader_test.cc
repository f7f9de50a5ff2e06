#include "worker/model/gguf_model_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/worker/model/gguf_test_writer.h"

namespace ripplekv::worker {
namespace {

using kernels::GgmlType;
using kernels::Shape;
using testing::GgufWriter;
using ::testing::HasSubstr;

// A tiny GQA model: d_model 32 (one q8_0 block per row), 4 heads of 8, 2 KV heads, d_ff 64.
constexpr int kLayers = 2, kDModel = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kFf = 64,
              kVocab = 16;

struct TinyOptions {
  std::string arch = "llama";
  bool tied = true;
  bool rope_freqs = false;
  std::set<std::string> skip;      // tensors to leave out
  std::string reshape;             // tensor to give a wrong shape
  std::vector<std::string> extra;  // unexpected tensors to add
  bool q8_wq = false;              // store blk.N.attn_q.weight as q8_0
  std::set<std::string> skip_keys;
};

// Each tensor is filled with `seed + i * 0.001` so tests can tell tensors apart.
std::vector<float> Fill(size_t n, float seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i) * 0.001f;
  return v;
}

// q8_0 blocks holding d = 1, q[i] = (row + i) % 7 - 3 for a [rows, 32] matrix.
std::vector<uint8_t> Q8Matrix(int rows) {
  std::vector<uint8_t> b;
  for (int r = 0; r < rows; ++r) {
    b.push_back(0x00);
    b.push_back(0x3C);
    for (int i = 0; i < 32; ++i)
      b.push_back(static_cast<uint8_t>(static_cast<int8_t>((r + i) % 7 - 3)));
  }
  return b;
}

std::vector<uint8_t> TinyModel(const TinyOptions& o) {
  GgufWriter w;
  const std::string a = o.arch;
  auto key = [&](const std::string& k) { return a + "." + k; };
  auto maybe_u32 = [&](const std::string& k, uint32_t v) {
    if (!o.skip_keys.contains(k)) w.U32(key(k), v);
  };
  w.String("general.architecture", a).String("general.name", "tiny");
  maybe_u32("block_count", kLayers);
  maybe_u32("embedding_length", kDModel);
  maybe_u32("feed_forward_length", kFf);
  maybe_u32("attention.head_count", kHeads);
  maybe_u32("attention.head_count_kv", kKvHeads);
  maybe_u32("context_length", 128);
  maybe_u32("rope.dimension_count", kHeadDim);
  if (!o.skip_keys.contains("attention.layer_norm_rms_epsilon")) {
    w.F32(key("attention.layer_norm_rms_epsilon"), 1e-6f);
  }
  w.F32(key("rope.freq_base"), 500000.0f);

  float seed = 1.0f;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims) {
    seed += 1.0f;
    if (o.skip.contains(name)) return;
    if (name == o.reshape) dims[0] -= 2;
    size_t n = 1;
    for (uint64_t d : dims) n *= d;
    w.TensorF32(name, dims, Fill(n, seed));
  };
  const uint64_t d = kDModel, q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim, ff = kFf;
  add("token_embd.weight", {d, kVocab});
  add("output_norm.weight", {d});
  if (!o.tied) add("output.weight", {d, kVocab});
  if (o.rope_freqs) add("rope_freqs.weight", {kHeadDim / 2});
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {d});
    if (o.q8_wq) {
      w.Tensor(p + "attn_q.weight", {d, q}, GgmlType::kQ8_0, Q8Matrix(q));
    } else {
      add(p + "attn_q.weight", {d, q});
    }
    add(p + "attn_k.weight", {d, kv});
    add(p + "attn_v.weight", {d, kv});
    add(p + "attn_output.weight", {q, d});
    if (a == "qwen2") {
      add(p + "attn_q.bias", {q});
      add(p + "attn_k.bias", {kv});
      add(p + "attn_v.bias", {kv});
    }
    add(p + "ffn_norm.weight", {d});
    add(p + "ffn_gate.weight", {d, ff});
    add(p + "ffn_up.weight", {d, ff});
    add(p + "ffn_down.weight", {ff, d});
  }
  for (const std::string& name : o.extra) w.TensorF32(name, {4}, {1, 2, 3, 4});
  return w.Build();
}

StatusOr<Model> Load(const std::vector<uint8_t>& bytes) {
  auto file = GgufFile::FromBuffer(bytes, "tiny.gguf");
  if (!file.ok()) return file.status();
  return LoadGgufModel(**file);
}

std::string Msg(const Status& s) { return std::string(s.message()); }

TEST(GgufModelLoaderTest, LoadsTinyLlamaConfigAndShapes) {
  const std::vector<uint8_t> bytes = TinyModel({});
  StatusOr<Model> m = Load(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.n_layers, kLayers);
  EXPECT_EQ(c.d_model, kDModel);
  EXPECT_EQ(c.n_heads, kHeads);
  EXPECT_EQ(c.n_kv_heads, kKvHeads);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.d_ff, kFf);
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_EQ(c.context_length, 128);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_scaling.factor, 0.0f);

  EXPECT_EQ(m->tok_embeddings.shape(), (Shape{kVocab, kDModel}));
  EXPECT_TRUE(m->output.empty());
  EXPECT_EQ(&m->lm_head(), &m->tok_embeddings);
  EXPECT_TRUE(m->rope_freq_factors.empty());
  EXPECT_EQ(m->output_norm.shape(), (Shape{kDModel}));
  ASSERT_EQ(m->layers.size(), static_cast<size_t>(kLayers));
  const LayerWeights& l1 = m->layers[1];
  EXPECT_EQ(l1.wq.shape(), (Shape{kHeads * kHeadDim, kDModel}));
  EXPECT_EQ(l1.wk.shape(), (Shape{kKvHeads * kHeadDim, kDModel}));
  EXPECT_EQ(l1.wv.shape(), (Shape{kKvHeads * kHeadDim, kDModel}));
  EXPECT_EQ(l1.wo.shape(), (Shape{kDModel, kHeads * kHeadDim}));
  EXPECT_EQ(l1.w_gate.shape(), (Shape{kFf, kDModel}));
  EXPECT_EQ(l1.w_up.shape(), (Shape{kFf, kDModel}));
  EXPECT_EQ(l1.w_down.shape(), (Shape{kDModel, kFf}));
  EXPECT_TRUE(l1.bq.empty());

  // The right data lands in the right field: tensors were filled in order with seeds 2, 3, ...;
  // layer 1's attn_q is tensor #13 (embd, norm, 9 of layer 0, layer 1's attn_norm, attn_q).
  EXPECT_FLOAT_EQ(m->tok_embeddings.f32()[0], 2.0f);
  EXPECT_FLOAT_EQ(m->layers[0].attn_norm.data()[0], 4.0f);
  EXPECT_FLOAT_EQ(l1.wq.f32()[0], 14.0f);
  EXPECT_FLOAT_EQ(l1.wq.f32()[kDModel + 1], 14.0f + (kDModel + 1) * 0.001f);  // row 1, col 1
}

TEST(GgufModelLoaderTest, LoadsTinyQwen2WithBiasesAndUntiedOutput) {
  TinyOptions o;
  o.arch = "qwen2";
  o.tied = false;
  StatusOr<Model> m = Load(TinyModel(o));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.architecture, "qwen2");
  EXPECT_EQ(m->config.rope_style, RopeStyle::kHalfSplit);
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_FALSE(m->config.tied_embeddings);
  EXPECT_EQ(m->output.shape(), (Shape{kVocab, kDModel}));
  EXPECT_EQ(&m->lm_head(), &m->output);
  EXPECT_EQ(m->layers[0].bq.shape(), (Shape{kHeads * kHeadDim}));
  EXPECT_EQ(m->layers[0].bk.shape(), (Shape{kKvHeads * kHeadDim}));
  EXPECT_EQ(m->layers[1].bv.shape(), (Shape{kKvHeads * kHeadDim}));
}

TEST(GgufModelLoaderTest, MistralIsReadLikeLlama) {
  TinyOptions o;
  o.arch = "mistral";
  StatusOr<Model> m = Load(TinyModel(o));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.rope_style, RopeStyle::kInterleaved);
}

TEST(GgufModelLoaderTest, DequantizesQuantizedWeights) {
  TinyOptions o;
  o.q8_wq = true;
  StatusOr<Model> m = Load(TinyModel(o));
  ASSERT_TRUE(m.ok()) << m.status();
  const kernels::Tensor wq = m->layers[0].wq.Expand();
  EXPECT_EQ(wq.shape(), (Shape{kHeads * kHeadDim, kDModel}));
  EXPECT_EQ(wq.data()[0], -3.0f);               // row 0, col 0: (0 + 0) % 7 - 3
  EXPECT_EQ(wq.data()[2 * kDModel + 3], 2.0f);  // row 2, col 3: (2 + 3) % 7 - 3
}

TEST(GgufModelLoaderTest, FillsRopeFreqFactorsWhenPresent) {
  TinyOptions o;
  o.rope_freqs = true;
  StatusOr<Model> m = Load(TinyModel(o));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rope_freq_factors.shape(), (Shape{kHeadDim / 2}));
}

TEST(GgufModelLoaderTest, UnknownArchitectureNamesTheSupportedOnes) {
  TinyOptions o;
  o.arch = "gpt2";
  const Status s = Load(TinyModel(o)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(s),
            "unsupported architecture 'gpt2' in tiny.gguf; supported: llama, mistral, qwen2");
}

TEST(GgufModelLoaderTest, WrongTensorShapeNamesTensorAndBothShapes) {
  TinyOptions o;
  o.reshape = "blk.1.attn_k.weight";
  const Status s = Load(TinyModel(o)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("tiny.gguf: tensor 'blk.1.attn_k.weight' has shape [16, 30], "
                                "expected [16, 32]"));
}

TEST(GgufModelLoaderTest, MissingTensorIsNamed) {
  TinyOptions o;
  o.skip = {"blk.0.ffn_up.weight"};
  EXPECT_THAT(Msg(Load(TinyModel(o)).status()),
              HasSubstr("tensor 'blk.0.ffn_up.weight' is missing (expected shape [64, 32])"));
  TinyOptions qwen;
  qwen.arch = "qwen2";
  qwen.skip = {"blk.1.attn_v.bias"};
  EXPECT_THAT(Msg(Load(TinyModel(qwen)).status()), HasSubstr("'blk.1.attn_v.bias' is missing"));
}

TEST(GgufModelLoaderTest, UnexpectedTensorIsRefused) {
  TinyOptions o;
  o.extra = {"blk.0.attn_q_norm.weight"};
  EXPECT_THAT(Msg(Load(TinyModel(o)).status()),
              HasSubstr("unexpected tensor 'blk.0.attn_q_norm.weight'"));
  TinyOptions extra_layer;  // tensors of a layer beyond block_count
  extra_layer.extra = {"blk.2.attn_norm.weight"};
  EXPECT_THAT(Msg(Load(TinyModel(extra_layer)).status()), HasSubstr("unexpected tensor"));
}

TEST(GgufModelLoaderTest, MissingKeyIsNamed) {
  TinyOptions o;
  o.skip_keys = {"feed_forward_length"};
  const Status s = Load(TinyModel(o)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("metadata key 'llama.feed_forward_length' is missing"));
}

TEST(GgufModelLoaderTest, HeadCountKvDefaultsToHeadCount) {
  TinyOptions o;
  o.skip_keys = {"attention.head_count_kv"};
  // Without the key the file says MHA (4 KV heads), so the GQA-shaped K tensor no longer fits.
  EXPECT_THAT(Msg(Load(TinyModel(o)).status()),
              HasSubstr("tensor 'blk.0.attn_k.weight' has shape [16, 32], expected [32, 32]"));
  auto file = GgufFile::FromBuffer(TinyModel(o), "tiny.gguf");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadGgufConfig(**file)->n_kv_heads, kHeads);
}

TEST(GgufModelLoaderTest, InconsistentHyperParametersAreRefused) {
  GgufWriter w;
  w.String("general.architecture", "llama")
      .U32("llama.block_count", 1000000)
      .U32("llama.embedding_length", 32)
      .U32("llama.feed_forward_length", 64)
      .U32("llama.attention.head_count", 4)
      .U32("llama.attention.head_count_kv", 3)
      .U32("llama.context_length", 8)
      .F32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.TensorF32("token_embd.weight", {32, 2}, std::vector<float>(64, 0.0f));
  auto file = GgufFile::FromBuffer(w.Build(), "bad.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(Msg(ReadGgufConfig(**file).status()),
              HasSubstr("head_count 4 is not a multiple of attention.head_count_kv 3"));
}

TEST(GgufModelLoaderTest, HugeBlockCountFailsBeforeAllocatingLayers) {
  GgufWriter w;
  w.String("general.architecture", "llama")
      .U32("llama.block_count", 2000000000)
      .U32("llama.embedding_length", 32)
      .U32("llama.feed_forward_length", 64)
      .U32("llama.attention.head_count", 4)
      .U32("llama.context_length", 8)
      .F32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.TensorF32("token_embd.weight", {32, 2}, std::vector<float>(64, 0.0f));
  auto file = GgufFile::FromBuffer(w.Build(), "bad.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(Msg(LoadGgufModel(**file).status()), HasSubstr("but the file has only 1 tensors"));
}

TEST(GgufModelLoaderTest, UnsupportedRopeScalingIsRefused) {
  GgufWriter w;
  w.String("general.architecture", "llama")
      .U32("llama.block_count", 1)
      .U32("llama.embedding_length", 32)
      .U32("llama.feed_forward_length", 64)
      .U32("llama.attention.head_count", 4)
      .U32("llama.context_length", 8)
      .F32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .String("llama.rope.scaling.type", "yarn")
      .F32("llama.rope.scaling.factor", 4.0f);
  w.TensorF32("token_embd.weight", {32, 2}, std::vector<float>(64, 0.0f));
  auto file = GgufFile::FromBuffer(w.Build(), "yarn.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ReadGgufConfig(**file).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace ripplekv::worker
