// The Hugging Face safetensors path (RopeStyle::kHalfSplit on unpermuted Q/K) computes the same
// model as the GGUF path (RopeStyle::kInterleaved on llama.cpp's permuted Q/K), on the real
// SmolLM2-135M-Instruct weights: the GGUF model is written back out as a Hugging Face directory
// (Q/K un-permuted the way convert_hf_to_gguf permuted them), reloaded with LoadHfModel, and both
// models' logits are compared over every position and the whole vocabulary. A convention bug on
// either side (RoPE pairing, permutation, head order) moves logits by whole units.
// Label `model`: needs RIPPLEKV_SMOLLM2_GGUF.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/worker/model/hf_test_writer.h"
#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"
#include "worker/model/hf_model_loader.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

using testing::TempDir;
using testing::WriteFile;

// Both paths run the same fp32 arithmetic except for the order of a few sums (RoPE pairs, the
// Q.K dot product over permuted dimensions), so logits agree to rounding: measured 4.8e-5.
constexpr double kMaxEquivalentLogitDiff = 1e-3;
// Feeding llama.cpp's permuted Q/K to the half-split path pairs the wrong dimensions in RoPE.
constexpr double kMinBrokenLogitDiff = 1.0;
constexpr int kNumTokens = 40;

// convert_hf_to_gguf.py stores Q (n_head = n_heads) and K (n_head = n_kv_heads) as
//   w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(rows, cols),
// i.e. GGUF row h * hd + 2 * j + s holds HF row h * hd + s * hd / 2 + j. This is the inverse.
std::vector<float> UnpermuteQk(const kernels::ConstTensorView& gguf, int n_head) {
  const int64_t rows = gguf.dim(0), cols = gguf.dim(1);
  const int64_t hd = rows / n_head, half = hd / 2;
  std::vector<float> hf(static_cast<size_t>(rows * cols));
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t s = 0; s < 2; ++s) {
        const float* src = gguf.data + (h * hd + 2 * j + s) * cols;
        std::copy(src, src + cols, hf.data() + (h * hd + s * half + j) * cols);
      }
    }
  }
  return hf;
}

std::string HfConfigJson(const ModelConfig& c) {
  nlohmann::json j = {
      {"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
      {"model_type", "llama"},
      {"hidden_size", c.d_model},
      {"intermediate_size", c.d_ff},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"rms_norm_eps", c.rms_eps},
      {"rope_theta", c.rope_theta},
      {"max_position_embeddings", c.context_length},
      {"tie_word_embeddings", true},
      {"vocab_size", c.vocab_size},
      {"hidden_act", "silu"},
  };
  return j.dump();
}

// Writes `model` (tied embeddings, no biases, no rope scaling) as an F32 Hugging Face llama
// directory into `dir`. The safetensors file is streamed tensor by tensor, so writing costs no
// more memory than one Q/K matrix. With `unpermute_qk` false, Q/K are written in llama.cpp's
// permuted order: a deliberately wrong model.
void WriteHfModel(const Model& model, const std::string& dir, bool unpermute_qk) {
  const ModelConfig& c = model.config;
  WriteFile(dir + "/config.json", HfConfigJson(c));

  struct Entry {
    std::string name;
    kernels::ConstTensorView tensor;  // fp32 (the model is loaded with WeightStorage::kF32)
    int qk_heads;                     // > 0: un-permute with this many heads
  };
  std::vector<Entry> entries;
  entries.push_back({"model.embed_tokens.weight", model.tok_embeddings.view(), 0});
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerWeights& l = model.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    entries.push_back({p + "input_layernorm.weight", l.attn_norm.view(), 0});
    entries.push_back({p + "self_attn.q_proj.weight", l.wq.view(), unpermute_qk ? c.n_heads : 0});
    entries.push_back(
        {p + "self_attn.k_proj.weight", l.wk.view(), unpermute_qk ? c.n_kv_heads : 0});
    entries.push_back({p + "self_attn.v_proj.weight", l.wv.view(), 0});
    entries.push_back({p + "self_attn.o_proj.weight", l.wo.view(), 0});
    entries.push_back({p + "post_attention_layernorm.weight", l.ffn_norm.view(), 0});
    entries.push_back({p + "mlp.gate_proj.weight", l.w_gate.view(), 0});
    entries.push_back({p + "mlp.up_proj.weight", l.w_up.view(), 0});
    entries.push_back({p + "mlp.down_proj.weight", l.w_down.view(), 0});
  }
  entries.push_back({"model.norm.weight", model.output_norm.view(), 0});

  std::string header = "{";
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    const uint64_t bytes = static_cast<uint64_t>(e.tensor.numel()) * sizeof(float);
    header += (offset == 0 ? "\"" : ",\"") + e.name +
              "\":{\"dtype\":\"F32\",\"shape\":" + nlohmann::json(e.tensor.shape).dump() +
              ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');  // the format pads the header to 8 bytes

  const std::string path = dir + "/model.safetensors";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t header_len = header.size();
  out.write(reinterpret_cast<const char*>(&header_len), sizeof(header_len));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const Entry& e : entries) {
    std::vector<float> unpermuted;
    std::span<const float> values(e.tensor.data, static_cast<size_t>(e.tensor.numel()));
    if (e.qk_heads > 0) {
      unpermuted = UnpermuteQk(e.tensor, e.qk_heads);
      values = unpermuted;
    }
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size_bytes()));
  }
  out.close();
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<int32_t> FixtureTokens() {
  std::ifstream in(std::string(RIPPLEKV_FIXTURES_DIR) + "/llamacpp/logits.json");
  EXPECT_TRUE(in) << "missing fixture llamacpp/logits.json";
  std::stringstream s;
  s << in.rdbuf();
  const nlohmann::json fixture = nlohmann::json::parse(s.str());
  for (const auto& prompt : fixture["prompts"]) {
    if (prompt["name"] != "paragraph") continue;
    std::vector<int32_t> ids = prompt["ids"].get<std::vector<int32_t>>();
    EXPECT_GE(ids.size(), static_cast<size_t>(kNumTokens));
    ids.resize(std::min(ids.size(), static_cast<size_t>(kNumTokens)));
    return ids;
  }
  ADD_FAILURE() << "no 'paragraph' prompt in llamacpp/logits.json";
  return {};
}

// [n_tokens, vocab] logits of every position.
StatusOr<kernels::Tensor> AllLogits(const Model& model, std::span<const int32_t> tokens) {
  ASSIGN_OR_RETURN(Transformer t, Transformer::Create(model, {.num_threads = 2}));
  KvCache cache(model.config, static_cast<int>(tokens.size()));
  ForwardRequest request;
  request.tokens = tokens;
  request.logits = LogitRows::kAll;
  ASSIGN_OR_RETURN(ForwardResult r, t.Forward(request, cache));
  return std::move(r.logits);
}

double MaxAbsDiff(const kernels::Tensor& a, const kernels::Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
  }
  return m;
}

class HfGgufEquivalenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr) return;
    auto model = LoadModel(path, WeightStorage::kF32);  // fp32 matrices, written out as F32
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_EQ(model->config.rope_style, RopeStyle::kInterleaved) << "expected a GGUF llama model";
    ASSERT_TRUE(model->config.tied_embeddings);
    ASSERT_TRUE(model->rope_freq_factors.empty());
    tokens_ = new std::vector<int32_t>(FixtureTokens());
    ASSERT_EQ(tokens_->size(), static_cast<size_t>(kNumTokens));
    auto logits = AllLogits(*model, *tokens_);
    ASSERT_TRUE(logits.ok()) << logits.status();
    gguf_logits_ = new kernels::Tensor(std::move(logits).value());
    gguf_model_ = new Model(std::move(model).value());
  }
  static void TearDownTestSuite() {
    delete gguf_model_;
    delete gguf_logits_;
    delete tokens_;
    gguf_model_ = nullptr;
    gguf_logits_ = nullptr;
    tokens_ = nullptr;
  }
  void SetUp() override {
    if (std::getenv("RIPPLEKV_SMOLLM2_GGUF") == nullptr) {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set (path to SmolLM2-135M-Instruct GGUF)";
    }
    ASSERT_NE(gguf_logits_, nullptr) << "loading the GGUF model failed (see above)";
  }

  // Logits of the GGUF model written as a Hugging Face directory and loaded back.
  static StatusOr<kernels::Tensor> HfLogits(bool unpermute_qk) {
    TempDir dir;
    WriteHfModel(*gguf_model_, dir.path(), unpermute_qk);
    if (::testing::Test::HasFatalFailure()) return absl::InternalError("writing the model failed");
    ASSIGN_OR_RETURN(Model hf, LoadHfModel(dir.path()));
    EXPECT_EQ(hf.config.rope_style, RopeStyle::kHalfSplit);
    return AllLogits(hf, *tokens_);
  }

  static Model* gguf_model_;
  static kernels::Tensor* gguf_logits_;  // [kNumTokens, vocab]
  static std::vector<int32_t>* tokens_;
};
Model* HfGgufEquivalenceTest::gguf_model_ = nullptr;
kernels::Tensor* HfGgufEquivalenceTest::gguf_logits_ = nullptr;
std::vector<int32_t>* HfGgufEquivalenceTest::tokens_ = nullptr;

TEST_F(HfGgufEquivalenceTest, HfDirectoryWithUnpermutedQkGivesGgufLogits) {
  auto hf_logits = HfLogits(/*unpermute_qk=*/true);
  ASSERT_TRUE(hf_logits.ok()) << hf_logits.status();
  ASSERT_EQ(hf_logits->shape(), gguf_logits_->shape());
  const double diff = MaxAbsDiff(*hf_logits, *gguf_logits_);
  std::printf(
      "HF (half-split RoPE, un-permuted Q/K) vs GGUF (interleaved RoPE): max |dlogit| "
      "%.3g over %lld positions x %lld ids\n",
      diff, static_cast<long long>(gguf_logits_->dim(0)),
      static_cast<long long>(gguf_logits_->dim(1)));
  EXPECT_LT(diff, kMaxEquivalentLogitDiff);
}

TEST_F(HfGgufEquivalenceTest, HfDirectoryWithGgufPermutedQkGivesDifferentLogits) {
  auto hf_logits = HfLogits(/*unpermute_qk=*/false);
  ASSERT_TRUE(hf_logits.ok()) << hf_logits.status();
  ASSERT_EQ(hf_logits->shape(), gguf_logits_->shape());
  const double diff = MaxAbsDiff(*hf_logits, *gguf_logits_);
  std::printf("HF with llama.cpp-permuted Q/K vs GGUF: max |dlogit| %.3g\n", diff);
  EXPECT_GT(diff, kMinBrokenLogitDiff);
}

}  // namespace
}  // namespace ripplekv::worker
