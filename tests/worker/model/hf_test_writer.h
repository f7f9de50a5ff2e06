#pragma once
// Test helpers: write safetensors files, shard indexes, config.json and whole tiny random
// LLaMA-family models into temporary directories. Header-only; JSON is written by hand so the
// helpers do not depend on a JSON library.

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dequant/fp16.h"
#include "tests/common/temp_dir.h"

namespace ripplekv::worker::testing {

using ripplekv::testing::TempDir;

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One tensor to serialize: `bytes` is its raw little-endian data, written as given (tests of
// malformed files may make it disagree with dtype and shape).
struct TestTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", or any string
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string F32Bytes(std::span<const float> v) {
  std::string s(v.size() * 4, '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}
inline std::string U16Bytes(std::span<const uint16_t> v) {
  std::string s(v.size() * 2, '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}
inline std::string F16Bytes(std::span<const float> v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(kernels::FloatToHalf(f));
  return U16Bytes(h);
}
inline std::string Bf16Bytes(std::span<const float> v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(kernels::FloatToBf16(f));
  return U16Bytes(h);
}

inline std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// u64 length prefix + header text + data, exactly as given.
inline std::string SafetensorsFromParts(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// A well-formed file holding `tensors` back to back in the given order. `extra_entries` is
// spliced into the header object verbatim (e.g. a "__metadata__" entry), with its own comma.
inline std::string SafetensorsBytes(const std::vector<TestTensor>& tensors,
                                    const std::string& extra_entries = "") {
  std::string header = "{" + extra_entries;
  std::string data;
  bool first = extra_entries.empty();
  for (const TestTensor& t : tensors) {
    const size_t begin = data.size();
    data += t.bytes;
    header += (first ? "" : ",") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":" + ShapeJson(t.shape) + ",\"data_offsets\":[" + std::to_string(begin) +
              "," + std::to_string(data.size()) + "]}";
    first = false;
  }
  header += "}";
  return SafetensorsFromParts(header, data);
}

// ---------------------------------------------------------------------------------------------
// Tiny random models.

struct TinyModelSpec {
  std::string model_type = "llama";  // llama | mistral | qwen2
  int vocab_size = 19;
  int d_model = 8;
  int n_layers = 2;
  int n_heads = 2;
  int n_kv_heads = 1;
  int d_ff = 12;
  bool write_lm_head = true;
  bool tie_word_embeddings = false;
  std::string dtype = "F32";  // dtype of every tensor: F32 | F16 | BF16
};

struct TinyModel {
  std::vector<TestTensor> tensors;
  // Exact fp32 values a loader must produce for each tensor (after the dtype's rounding).
  std::map<std::string, std::vector<float>> expected;
};

inline TinyModel MakeTinyModel(const TinyModelSpec& s, uint32_t seed = 7) {
  TinyModel m;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t hd = s.d_model / s.n_heads;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      x = dist(rng);
      if (s.dtype == "F16") x = kernels::HalfToFloat(kernels::FloatToHalf(x));
      if (s.dtype == "BF16") x = kernels::Bf16ToFloat(kernels::FloatToBf16(x));
    }
    std::string bytes = s.dtype == "F16"    ? F16Bytes(v)
                        : s.dtype == "BF16" ? Bf16Bytes(v)
                                            : F32Bytes(v);
    m.tensors.push_back({name, s.dtype, std::move(shape), std::move(bytes)});
    m.expected[name] = std::move(v);
  };
  add("model.embed_tokens.weight", {s.vocab_size, s.d_model});
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {s.d_model});
    add(p + "self_attn.q_proj.weight", {s.n_heads * hd, s.d_model});
    add(p + "self_attn.k_proj.weight", {s.n_kv_heads * hd, s.d_model});
    add(p + "self_attn.v_proj.weight", {s.n_kv_heads * hd, s.d_model});
    add(p + "self_attn.o_proj.weight", {s.d_model, s.n_heads * hd});
    if (s.model_type == "qwen2") {
      add(p + "self_attn.q_proj.bias", {s.n_heads * hd});
      add(p + "self_attn.k_proj.bias", {s.n_kv_heads * hd});
      add(p + "self_attn.v_proj.bias", {s.n_kv_heads * hd});
    }
    add(p + "post_attention_layernorm.weight", {s.d_model});
    add(p + "mlp.gate_proj.weight", {s.d_ff, s.d_model});
    add(p + "mlp.up_proj.weight", {s.d_ff, s.d_model});
    add(p + "mlp.down_proj.weight", {s.d_model, s.d_ff});
  }
  add("model.norm.weight", {s.d_model});
  if (s.write_lm_head) add("lm_head.weight", {s.vocab_size, s.d_model});
  return m;
}

inline std::string TinyConfigJson(const TinyModelSpec& s, const std::string& extra_fields = "") {
  const std::string arch = s.model_type == "qwen2"     ? "Qwen2ForCausalLM"
                           : s.model_type == "mistral" ? "MistralForCausalLM"
                                                       : "LlamaForCausalLM";
  return "{\"architectures\":[\"" + arch + "\"],\"model_type\":\"" + s.model_type +
         "\",\"hidden_size\":" + std::to_string(s.d_model) +
         ",\"intermediate_size\":" + std::to_string(s.d_ff) +
         ",\"num_hidden_layers\":" + std::to_string(s.n_layers) +
         ",\"num_attention_heads\":" + std::to_string(s.n_heads) +
         ",\"num_key_value_heads\":" + std::to_string(s.n_kv_heads) +
         ",\"rms_norm_eps\":1e-05,\"rope_theta\":100000.0,\"max_position_embeddings\":256" +
         ",\"vocab_size\":" + std::to_string(s.vocab_size) +
         ",\"tie_word_embeddings\":" + (s.tie_word_embeddings ? "true" : "false") +
         ",\"hidden_act\":\"silu\"" + extra_fields + "}";
}

// Writes config.json and the weights of `model` into `dir`: one model.safetensors when
// `n_shards` == 1, else model-0000K-of-0000N.safetensors shards (tensors dealt round-robin)
// plus model.safetensors.index.json.
inline void WriteTinyModel(const std::string& dir, const TinyModelSpec& spec,
                           const TinyModel& model, int n_shards = 1) {
  WriteFile(dir + "/config.json", TinyConfigJson(spec));
  if (n_shards == 1) {
    WriteFile(dir + "/model.safetensors", SafetensorsBytes(model.tensors));
    return;
  }
  std::vector<std::vector<TestTensor>> shards(static_cast<size_t>(n_shards));
  std::string weight_map;
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const size_t k = i % shards.size();
    shards[k].push_back(model.tensors[i]);
    char shard_name[64];
    std::snprintf(shard_name, sizeof(shard_name), "model-%05zu-of-%05d.safetensors", k + 1,
                  n_shards);
    weight_map +=
        (i ? "," : "") + std::string("\"") + model.tensors[i].name + "\":\"" + shard_name + "\"";
  }
  for (size_t k = 0; k < shards.size(); ++k) {
    char shard_name[64];
    std::snprintf(shard_name, sizeof(shard_name), "model-%05zu-of-%05d.safetensors", k + 1,
                  n_shards);
    WriteFile(dir + "/" + shard_name, SafetensorsBytes(shards[k]));
  }
  WriteFile(dir + "/model.safetensors.index.json",
            "{\"metadata\":{\"total_size\":0},\"weight_map\":{" + weight_map + "}}");
}

}  // namespace ripplekv::worker::testing
