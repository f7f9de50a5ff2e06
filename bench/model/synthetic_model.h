#pragma once
// Synthetic models: GGUF files with the shapes and metadata of published LLaMA-family models and
// seeded random weights, for benchmarks and tests at real sizes without downloading weights
// (bench/make-model). What they compute is noise, but every layer runs the real model's amount
// of work on the real model's tensor shapes.
//
// The file is what llama.cpp's converter writes for the architecture (general.architecture
// "llama" or "qwen2"; Llama 3.1 rope scaling as the `rope_freqs.weight` tensor; Qwen2 QKV biases;
// SmolLM2's tied embeddings) and loads with LoadModel. Its tokenizer is a small byte-level one
// (tokenizer.ggml.model "gpt2", the shape's pre-tokenizer type, its special tokens first, then
// the 256 bytes in GPT-2's byte-to-unicode form, no merges), padded with "<unused_N>" tokens of
// type unused up to the model's vocabulary, so every token id of the embedding has a token.
//
// Weights: uniform in [-a, a] with a = sqrt(3) * std (so the standard deviation is `std`):
//   token_embd, attn_q/k/v, ffn_gate/up, output 1/sqrt(fan_in) (d_model for the embedding, as
//   trained models have it, so that tied logits are of order one too); attn_output and ffn_down
//   1/sqrt(fan_in * 2 * n_layers), so each layer adds a small update to the residual stream and
//   activations stay of order one through every layer; norms 1; biases std 0.02.
// Matrices are stored as `type`; norms, biases and rope factors stay F32, as in real GGUFs.
// Row r of tensor i draws from its own xoshiro256+ stream seeded from (seed, i, r), so the file
// is a pure function of the options, whatever the thread count or chunk size.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::bench {

// A published model's shape and the metadata of its GGUF conversion.
struct SyntheticShape {
  std::string_view name;          // "llama3-8b", as given to FindSyntheticShape
  std::string_view description;   // the model it copies, e.g. "Llama 3.1 8B"
  std::string_view architecture;  // general.architecture: "llama" or "qwen2"
  int n_layers = 0;
  int d_model = 0;
  int d_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int context_length = 0;  // tokens
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool qkv_bias = false;         // attn_{q,k,v}.bias tensors (Qwen2)
  bool tied_embeddings = false;  // no output.weight (SmolLM2)
  bool llama3_rope = false;      // rope_freqs.weight: Llama 3.1 scaling (factor 8, 1, 4, 8192)
  // Tokenizer: tokenizer.ggml.pre, the special tokens (ids 0.., control type), which of them are
  // BOS / EOS / EOT (index into `specials`, -1 for none), and add_bos.
  std::string_view tokenizer_pre;
  std::span<const std::string_view> specials;
  int bos = -1;
  int eos = -1;
  int eot = -1;
  bool add_bos = false;
};

// The shapes: llama3-8b, llama3-70b, qwen2-7b, mistral-7b, smollm2-135m.
std::span<const SyntheticShape> SyntheticShapes();
// The shape called `name`; InvalidArgument listing the known names otherwise.
StatusOr<SyntheticShape> FindSyntheticShape(std::string_view name);

struct SyntheticModelOptions {
  SyntheticShape shape;
  int n_layers = 0;    // 0: the shape's; otherwise >= 1
  int vocab_size = 0;  // 0: the shape's; otherwise >= specials + 256 (the tokenizer's own tokens)
  kernels::GgmlType type = kernels::GgmlType::kQ4_0;  // matrices: q4_0, q8_0, f16, bf16 or f32
  uint64_t seed = 0;
  int num_threads = 0;                      // OpenMP threads generating rows; 0: OpenMP's default
  int64_t chunk_bytes = int64_t{32} << 20;  // encoded bytes generated per write (peak memory)
  bool sync = true;                         // fsync before the file is renamed into place
  // Called after every chunk with the file bytes written so far and the file's size, from the
  // calling thread. Optional.
  std::function<void(uint64_t written, uint64_t total)> progress;
};

struct SyntheticModelStats {
  uint64_t file_bytes = 0;
  int64_t parameters = 0;  // elements over all tensors
  int tensors = 0;
  int n_layers = 0;
  int vocab_size = 0;
};

// Writes the model to `path` (atomically: GgufStreamWriter's temporary file and rename), never
// holding more than about options.chunk_bytes of tensor data plus the tokenizer metadata.
// Errors: InvalidArgument (bad options: layer count, vocabulary too small, a type that cannot be
// written, a shape whose rows are not whole blocks of it), those of GgufStreamWriter (file
// system, e.g. ResourceExhausted for a full disk).
[[nodiscard]] StatusOr<SyntheticModelStats> WriteSyntheticModel(
    const std::string& path, const SyntheticModelOptions& options);

}  // namespace ripplekv::bench
