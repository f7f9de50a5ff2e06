#pragma once
// A loaded LLaMA-family model: its hyper-parameters and weights. Weight matrices stay in their
// stored type (GGUF blocks mapped from the file) unless loaded with WeightStorage::kF32, and are
// expanded per slice at use (kernels/dequant/weight.h); norms, biases and RoPE factors are fp32.
// Produced by the GGUF and safetensors loaders (model_loader.h); read by the engine.
// Immutable after loading; safe to share between threads for reading.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/tensor/tensor.h"
#include "kernels/dequant/weight.h"

namespace ripplekv::worker {

// How a loader keeps weight matrices in memory (`--weights` on every command that loads a model).
enum class WeightStorage {
  kStored,  // "stored": as in the file (GGUF blocks mapped, never copied); expanded per slice at
            // use
  kF32,     // "f32": expanded to fp32 at load (the reference; 4 bytes per value)
};
// "stored" / "f32".
std::string_view WeightStorageName(WeightStorage storage);

// How RoPE pairs the dimensions of a head.
enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): llama.cpp's LLAMA_ROPE_TYPE_NORM, GGUF llama (Q/K permuted)
  kHalfSplit,    // pairs (i, i + d/2): HF / NeoX layout; GGUF qwen2, every safetensors model
};

// Llama 3 frequency scaling ("rope_type": "llama3"). factor == 0 means none.
struct Llama3RopeScaling {
  float factor = 0.0f;  // e.g. 8 for Llama 3.1
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_positions = 8192;
};

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "mistral" (as named by the file)
  std::string name;          // general.name or the HF model id, for display only
  int n_layers = 0;
  int d_model = 0;     // residual width
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  int head_dim = 0;    // usually d_model / n_heads
  int d_ff = 0;        // SwiGLU hidden width
  int vocab_size = 0;
  int context_length = 0;  // trained context, tokens
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  Llama3RopeScaling rope_scaling;
  bool qkv_bias = false;         // Qwen2
  bool tied_embeddings = false;  // output projection == token embedding
};

// Weight matrices are row-major [out_features, in_features] (the GGUF/HF layout), so a linear
// layer computes y = x * W^T. Biases are empty tensors when absent.
struct LayerWeights {
  kernels::Tensor attn_norm;   // [d_model]
  kernels::Weight wq;          // [n_heads * head_dim, d_model]
  kernels::Weight wk;          // [n_kv_heads * head_dim, d_model]
  kernels::Weight wv;          // [n_kv_heads * head_dim, d_model]
  kernels::Weight wo;          // [d_model, n_heads * head_dim]
  kernels::Tensor bq, bk, bv;  // [out] or empty
  kernels::Tensor ffn_norm;    // [d_model]
  kernels::Weight w_gate;      // [d_ff, d_model]
  kernels::Weight w_up;        // [d_ff, d_model]
  kernels::Weight w_down;      // [d_model, d_ff]
};

// Bytes the weights occupy in memory: stored matrices at their stored size, fp32 tensors at 4
// bytes per value. Mapped bytes count whether or not the kernel has paged them in yet.
struct Model;
int64_t WeightBytes(const Model& model);

// The part of a model one tensor-parallel rank holds (worker/model/model_shard.h; docs/DESIGN.md
// §3.2). A whole model is the one shard of size 1. A shard's config gives its own sizes (query and
// KV heads, d_ff, vocabulary slice); these fields place them in the whole model.
struct ModelShard {
  int rank = 0;
  int size = 1;
  int first_head = 0;     // global index of the first query head held
  int first_kv_head = 0;  // global index of the first KV head held
  int first_ff = 0;       // first SwiGLU hidden unit held
  int first_vocab = 0;    // first token of the LM head's vocabulary slice
  int vocab_size = 0;     // the whole vocabulary (0 for a whole model: config.vocab_size)
};

struct Model {
  ModelConfig config;
  ModelShard shard;
  kernels::Weight tok_embeddings;  // [vocab_size, d_model]
  std::vector<LayerWeights> layers;
  kernels::Tensor output_norm;  // [d_model]
  kernels::Weight output;       // [vocab_size, d_model]; empty when tied_embeddings
  // Per-dimension RoPE frequency divisors, [head_dim / 2], or empty. llama.cpp stores Llama 3
  // rope scaling this way (GGUF tensor `rope_freqs.weight`): pair i rotates at
  // rope_theta^(-2i / head_dim) / rope_freq_factors[i]. Mutually exclusive with rope_scaling.
  kernels::Tensor rope_freq_factors;

  // For weights mapped from a file: drops the mapping's resident pages from this process (read
  // again from the file on next use). A tensor-parallel rank calls it after sharding, so only
  // its own slices come back. Null when the weights are not mapped from a file.
  std::function<void()> release_mapped_pages;

  // The projection the logits use: `output`, or the embeddings when tied.
  const kernels::Weight& lm_head() const {
    return config.tied_embeddings ? tok_embeddings : output;
  }
};

}  // namespace ripplekv::worker
