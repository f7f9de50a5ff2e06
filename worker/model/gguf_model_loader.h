#pragma once
// Builds a Model from a GGUF file written by llama.cpp's converters.
//
// Supported architectures (general.architecture): llama (also SmolLM2, Llama 2/3), mistral, qwen2.
// Hyper-parameters come from `<arch>.*` metadata; weights are dequantized to fp32 row-major
// tensors ([ne1, ne0] for a matrix). Every tensor's shape is checked against the config and every
// tensor in the file must be one the architecture uses, so a file that would compute something
// else is refused rather than run. Llama 3 rope scaling arrives as the `rope_freqs.weight` tensor
// (Model::rope_freq_factors).

#include <memory>

#include "base/status.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

// Reads and validates the hyper-parameters only (cheap: nothing is dequantized). Errors:
// InvalidArgument naming the file and the key (unsupported architecture, missing or ill-typed
// key, inconsistent sizes), Unimplemented for features the engine lacks (partial rotary, rope
// scaling types other than llama3-style frequency factors).
StatusOr<ModelConfig> ReadGgufConfig(const GgufFile& file);

// ReadGgufConfig, then checks every tensor's shape (InvalidArgument naming the tensor, its shape
// and the expected one; unexpected or missing tensors likewise) before reading any weight. Weight
// matrices then stay in the file's mapping (kStored: `owner` must keep `file` alive, e.g. the
// shared_ptr that holds it; InvalidArgument when it is null) or are dequantized to fp32 (kF32).
// Norms, biases and RoPE factors are always fp32. Thread-safe (the file is only read).
StatusOr<Model> LoadGgufModel(const GgufFile& file, WeightStorage storage = WeightStorage::kF32,
                              std::shared_ptr<const void> owner = nullptr);

}  // namespace ripplekv::worker
