#include "worker/model/hf_model_loader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/model/hf_test_writer.h"

namespace ripplekv::worker {
namespace {

using ::testing::HasSubstr;
using testing::MakeTinyModel;
using testing::SafetensorsBytes;
using testing::TempDir;
using testing::TinyConfigJson;
using testing::TinyModel;
using testing::TinyModelSpec;
using testing::WriteFile;
using testing::WriteTinyModel;
using Json = nlohmann::json;

std::vector<float> Values(const kernels::Tensor& t) {
  return std::vector<float>(t.span().begin(), t.span().end());
}
std::vector<float> Values(const kernels::Weight& w) { return Values(w.Expand()); }

// Every tensor of `m` holds exactly the values written, with the shape written.
void ExpectWeightsMatch(const Model& m, const TinyModel& written) {
  auto check = [&](const std::string& name, const auto& t) {
    auto it = written.expected.find(name);
    ASSERT_NE(it, written.expected.end()) << name;
    EXPECT_EQ(Values(t), it->second) << name;
    for (const auto& tt : written.tensors) {
      if (tt.name == name) {
        EXPECT_EQ(t.shape(), tt.shape) << name;
      }
    }
  };
  check("model.embed_tokens.weight", m.tok_embeddings);
  check("model.norm.weight", m.output_norm);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const LayerWeights& l = m.layers[i];
    check(p + "input_layernorm.weight", l.attn_norm);
    check(p + "self_attn.q_proj.weight", l.wq);
    check(p + "self_attn.k_proj.weight", l.wk);
    check(p + "self_attn.v_proj.weight", l.wv);
    check(p + "self_attn.o_proj.weight", l.wo);
    check(p + "post_attention_layernorm.weight", l.ffn_norm);
    check(p + "mlp.gate_proj.weight", l.w_gate);
    check(p + "mlp.up_proj.weight", l.w_up);
    check(p + "mlp.down_proj.weight", l.w_down);
    if (m.config.qkv_bias) {
      check(p + "self_attn.q_proj.bias", l.bq);
      check(p + "self_attn.k_proj.bias", l.bk);
      check(p + "self_attn.v_proj.bias", l.bv);
    } else {
      EXPECT_TRUE(l.bq.empty() && l.bk.empty() && l.bv.empty());
    }
  }
  if (!m.config.tied_embeddings) check("lm_head.weight", m.output);
}

TEST(HfModelLoaderTest, LoadsTinyLlamaFromOneFile) {
  TempDir dir;
  TinyModelSpec spec;
  TinyModel written = MakeTinyModel(spec);
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "LlamaForCausalLM");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.d_model, 8);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.d_ff, 12);
  EXPECT_EQ(c.vocab_size, 19);
  EXPECT_EQ(c.context_length, 256);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
  EXPECT_EQ(c.rope_scaling.factor, 0.0f);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
  ASSERT_EQ(m->layers.size(), 2u);
  ExpectWeightsMatch(*m, written);
  EXPECT_EQ(&m->lm_head(), &m->output);
}

TEST(HfModelLoaderTest, LoadsTinyQwen2WithBiasesFromTwoShards) {
  TempDir dir;
  TinyModelSpec spec;
  spec.model_type = "qwen2";
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  TinyModel written = MakeTinyModel(spec, /*seed=*/11);
  WriteTinyModel(dir.path(), spec, written, /*n_shards=*/2);
  auto m = LoadHfModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.architecture, "qwen2");
  EXPECT_EQ(m->config.name, "Qwen2ForCausalLM");
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_EQ(m->config.head_dim, 2);
  EXPECT_EQ(m->layers[1].bk.shape(), (kernels::Shape{4}));
  ExpectWeightsMatch(*m, written);
}

TEST(HfModelLoaderTest, ShardedAndSingleFileLoadTheSameWeights) {
  TinyModelSpec spec;
  spec.n_layers = 3;
  TinyModel written = MakeTinyModel(spec, /*seed=*/3);
  TempDir one, three;
  WriteTinyModel(one.path(), spec, written, 1);
  WriteTinyModel(three.path(), spec, written, 3);
  auto a = LoadHfModel(one.path());
  auto b = LoadHfModel(three.path());
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(Values(a->layers[2].w_down), Values(b->layers[2].w_down));
  EXPECT_EQ(Values(a->output), Values(b->output));
}

TEST(HfModelLoaderTest, ConvertsBf16AndF16Weights) {
  for (const std::string dtype : {"BF16", "F16"}) {
    TempDir dir;
    TinyModelSpec spec;
    spec.dtype = dtype;
    TinyModel written = MakeTinyModel(spec);
    WriteTinyModel(dir.path(), spec, written);
    auto m = LoadHfModel(dir.path());
    ASSERT_TRUE(m.ok()) << dtype << ": " << m.status();
    ExpectWeightsMatch(*m, written);
  }
}

TEST(HfModelLoaderTest, StoredWeightsStayInTheirTypeAndExpandToTheSameValues) {
  for (const std::string dtype : {"BF16", "F16", "F32"}) {
    TempDir dir;
    TinyModelSpec spec;
    spec.dtype = dtype;
    TinyModel written = MakeTinyModel(spec);
    WriteTinyModel(dir.path(), spec, written, 2);
    auto m = LoadHfModel(dir.path(), WeightStorage::kStored);
    ASSERT_TRUE(m.ok()) << dtype << ": " << m.status();
    ExpectWeightsMatch(*m, written);  // compares the expanded values
    const kernels::GgmlType want = dtype == "F32"   ? kernels::GgmlType::kF32
                                   : dtype == "F16" ? kernels::GgmlType::kF16
                                                    : kernels::GgmlType::kBF16;
    EXPECT_EQ(m->layers[0].wq.type(), want) << dtype;
    EXPECT_EQ(m->layers[0].wq.MemoryBytes(),
              m->layers[0].wq.rows() * m->layers[0].wq.cols() * (dtype == "F32" ? 4 : 2));
  }
}

TEST(HfModelLoaderTest, AbsentLmHeadMeansTiedEmbeddings) {
  TempDir dir;
  TinyModelSpec spec;
  spec.write_lm_head = false;
  TinyModel written = MakeTinyModel(spec);
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_TRUE(m->output.empty());
  EXPECT_EQ(&m->lm_head(), &m->tok_embeddings);
}

TEST(HfModelLoaderTest, TieWordEmbeddingsIgnoresAStoredLmHead) {
  TempDir dir;
  TinyModelSpec spec;
  spec.tie_word_embeddings = true;
  TinyModel written = MakeTinyModel(spec);
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_TRUE(m->output.empty());
}

TEST(HfModelLoaderTest, MisshapenTensorNamesTensorAndBothShapes) {
  TempDir dir;
  TinyModelSpec spec;
  TinyModel written = MakeTinyModel(spec);
  for (auto& t : written.tensors) {
    if (t.name == "model.layers.1.self_attn.k_proj.weight") t.shape = {8, 4};  // same bytes
  }
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("'model.layers.1.self_attn.k_proj.weight'"));
  EXPECT_THAT(m.status().message(), HasSubstr("[8, 4]"));
  EXPECT_THAT(m.status().message(), HasSubstr("[4, 8]"));
}

TEST(HfModelLoaderTest, MissingTensorIsNamed) {
  TempDir dir;
  TinyModelSpec spec;
  spec.model_type = "qwen2";
  TinyModel written = MakeTinyModel(spec);
  std::erase_if(written.tensors,
                [](const auto& t) { return t.name == "model.layers.0.self_attn.v_proj.bias"; });
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("'model.layers.0.self_attn.v_proj.bias'"));
}

TEST(HfModelLoaderTest, UnsupportedWeightDtypeIsUnimplementedBeforeLoading) {
  TempDir dir;
  TinyModelSpec spec;
  TinyModel written = MakeTinyModel(spec);
  for (auto& t : written.tensors) {
    if (t.name == "model.norm.weight") t.dtype = "I32";  // same size as F32
  }
  WriteTinyModel(dir.path(), spec, written);
  auto m = LoadHfModel(dir.path());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("'model.norm.weight'"));
  EXPECT_THAT(m.status().message(), HasSubstr("I32"));
}

TEST(HfModelLoaderTest, LayerCountBeyondTheFilesFailsBeforeAllocating) {
  TempDir dir;
  TinyModelSpec spec;
  TinyModel written = MakeTinyModel(spec);
  WriteTinyModel(dir.path(), spec, written);
  spec.n_layers = 2000000000;
  WriteFile(dir.File("config.json"), TinyConfigJson(spec));
  auto m = LoadHfModel(dir.path());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("num_hidden_layers = 2000000000"));
}

TEST(HfModelLoaderTest, MissingConfigIsNotFound) {
  TempDir dir;
  TinyModelSpec spec;
  WriteFile(dir.File("model.safetensors"), SafetensorsBytes(MakeTinyModel(spec).tensors));
  auto m = LoadHfModel(dir.path());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("config.json"));
}

// ---------------------------------------------------------------------------------------------
// config.json

Json BaseConfig() { return Json::parse(TinyConfigJson(TinyModelSpec())); }

StatusOr<ModelConfig> Parse(const Json& j) { return ParseHfConfig(j.dump(), "dir/config.json"); }

void ExpectConfigError(const Json& j, absl::StatusCode code, const std::string& needle) {
  auto c = Parse(j);
  ASSERT_FALSE(c.ok()) << j.dump();
  EXPECT_EQ(c.status().code(), code) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr(needle));
}

TEST(HfConfigTest, AppliesDefaults) {
  Json j = BaseConfig();
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  j.erase("tie_word_embeddings");
  j.erase("architectures");
  j["head_dim"] = nullptr;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 4);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->name, "llama");
}

TEST(HfConfigTest, ExplicitHeadDimWins) {
  Json j = BaseConfig();
  j["head_dim"] = 16;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 16);
}

TEST(HfConfigTest, ReadsLlama3RopeScalingUnderEitherKey) {
  for (const char* key : {"rope_type", "type"}) {
    Json j = BaseConfig();
    j["rope_scaling"] = {{key, "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
    auto c = Parse(j);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
    EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
    EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(c->rope_scaling.original_max_positions, 8192);
  }
}

TEST(HfConfigTest, NullOrDefaultRopeScalingMeansNone) {
  Json j = BaseConfig();
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(Parse(j)->rope_scaling.factor, 0.0f);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(Parse(j)->rope_scaling.factor, 0.0f);
}

TEST(HfConfigTest, OtherRopeScalingIsUnimplementedNamingIt) {
  Json j = BaseConfig();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  ExpectConfigError(j, absl::StatusCode::kUnimplemented, "'yarn'");
}

TEST(HfConfigTest, IncompleteLlama3ScalingNamesTheField) {
  Json j = BaseConfig();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ExpectConfigError(j, absl::StatusCode::kInvalidArgument, "'rope_scaling.low_freq_factor'");
}

TEST(HfConfigTest, Qwen2ImpliesQkvBias) {
  Json j = BaseConfig();
  j["model_type"] = "qwen2";
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalfSplit);
}

TEST(HfConfigTest, SlidingWindowClampsContextOnlyWhereItApplies) {
  Json j = BaseConfig();
  j["sliding_window"] = 64;
  EXPECT_EQ(Parse(j)->context_length, 256);  // llama has no sliding window
  j["model_type"] = "mistral";
  EXPECT_EQ(Parse(j)->context_length, 64);
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = false;
  EXPECT_EQ(Parse(j)->context_length, 256);
  j["use_sliding_window"] = true;
  EXPECT_EQ(Parse(j)->context_length, 64);
  j["model_type"] = "mistral";
  j["sliding_window"] = nullptr;
  EXPECT_EQ(Parse(j)->context_length, 256);
}

TEST(HfConfigTest, UnsupportedModelTypeIsUnimplementedNamingIt) {
  Json j = BaseConfig();
  j["model_type"] = "gemma2";
  ExpectConfigError(j, absl::StatusCode::kUnimplemented, "'gemma2'");
}

TEST(HfConfigTest, UnsupportedFeaturesAreUnimplemented) {
  Json j = BaseConfig();
  j["hidden_act"] = "gelu";
  ExpectConfigError(j, absl::StatusCode::kUnimplemented, "'gelu'");
  j = BaseConfig();
  j["attention_bias"] = true;
  ExpectConfigError(j, absl::StatusCode::kUnimplemented, "attention_bias");
  j = BaseConfig();
  j["mlp_bias"] = true;
  ExpectConfigError(j, absl::StatusCode::kUnimplemented, "mlp_bias");
}

TEST(HfConfigTest, MissingRequiredFieldIsNamed) {
  for (const char* field :
       {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "rms_norm_eps", "max_position_embeddings", "vocab_size"}) {
    Json j = BaseConfig();
    j.erase(field);
    ExpectConfigError(j, absl::StatusCode::kInvalidArgument, std::string("'") + field + "'");
  }
}

TEST(HfConfigTest, MistypedFieldIsNamed) {
  const std::vector<std::pair<std::string, Json>> cases = {
      {"num_hidden_layers", "2"}, {"hidden_size", 8.5},       {"hidden_size", -8},
      {"vocab_size", 0},          {"rms_norm_eps", "1e-5"},   {"rope_theta", -1.0},
      {"tie_word_embeddings", 1}, {"num_key_value_heads", 3}, {"head_dim", 3},
      {"architectures", "Llama"}, {"model_type", 7},          {"hidden_size", 1ll << 40},
      {"rope_scaling", "llama3"},
  };
  for (const auto& [field, value] : cases) {
    Json j = BaseConfig();
    j[field] = value;
    ExpectConfigError(j, absl::StatusCode::kInvalidArgument, "'" + field + "'");
  }
}

TEST(HfConfigTest, NonJsonConfigReportsByteOffset) {
  auto c = ParseHfConfig("{\"a\": tru}", "dir/config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr("byte offset"));
  EXPECT_EQ(ParseHfConfig("[]", "c").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
