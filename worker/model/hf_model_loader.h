#pragma once
// Loads a Hugging Face LLaMA-family model directory (config.json + safetensors weights) into a
// Model of fp32 tensors.
//
// Supported `model_type`s: llama, mistral, qwen2 (qwen2 adds q/k/v biases). Every safetensors model
// uses RopeStyle::kHalfSplit (the HF layout; no Q/K permutation). Llama 3 RoPE scaling is carried
// in ModelConfig::rope_scaling; other scaling types are Unimplemented. A sliding attention window
// (mistral `sliding_window`, qwen2 with `use_sliding_window`) is honoured by clamping
// context_length to the window: within it, windowed and full attention are the same.
//
// Tensor names read (everything else in the files is ignored):
//   model.embed_tokens.weight, model.norm.weight, lm_head.weight (absent or tie_word_embeddings
//   -> tied_embeddings), and per layer N: model.layers.N.input_layernorm.weight,
//   .self_attn.{q,k,v,o}_proj.weight, .self_attn.{q,k,v}_proj.bias (qwen2),
//   .post_attention_layernorm.weight, .mlp.{gate,up,down}_proj.weight.
// All functions are thread-safe (they share no state).

#include <string>
#include <string_view>

#include "base/status.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

// Parses the text of a config.json. `display_name` (usually the file's path) starts every error.
// Errors: InvalidArgument (not JSON; a required field missing or of the wrong type or range —
// named), Unimplemented (a model_type, rope scaling type, activation or bias we do not run —
// named). Required: model_type, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, rms_norm_eps, max_position_embeddings, vocab_size. Defaults:
// num_key_value_heads = num_attention_heads, head_dim = hidden_size / num_attention_heads,
// rope_theta = 10000, tie_word_embeddings = false. `name` is architectures[0] when present, else
// model_type.
StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& display_name);

// Reads (at most 16 MiB) and parses `dir`/config.json. Errors as ParseHfConfig, plus those of
// ReadFileBounded (NotFound when absent, ResourceExhausted when over the cap; docs/ERRORS.md).
StatusOr<ModelConfig> LoadHfConfig(const std::string& dir);

// Reads config.json and the weights (SafetensorsModelFiles::Open(dir)), checks every tensor's
// presence and shape against the config before converting any (errors name the tensor, its shape
// and the shape config.json implies). Weight matrices stay in the mapped files with kStored (F32,
// F16, BF16; the model shares ownership of the files) or are converted to fp32 with kF32; norms
// and biases are always fp32. Errors: those of LoadHfConfig and
// SafetensorsModelFiles, InvalidArgument for a missing or misshapen tensor, Unimplemented for an
// unsupported tensor dtype.
StatusOr<Model> LoadHfModel(const std::string& dir, WeightStorage storage = WeightStorage::kF32);

}  // namespace ripplekv::worker
