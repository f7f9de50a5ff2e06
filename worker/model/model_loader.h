#pragma once
// One entry point for every supported model format.

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

enum class ModelFormat { kGguf, kSafetensorsDir };

// A path is GGUF when it is a file starting with the "GGUF" magic (only those 4 bytes are read), a
// safetensors model when it is a directory holding config.json. Errors, naming the path: NotFound
// (nothing there), InvalidArgument (neither format), those of ReadFilePrefix for a file that
// cannot be read (PermissionDenied, ...; docs/ERRORS.md).
StatusOr<ModelFormat> DetectModelFormat(const std::string& path);

// Loads the model at `path` (GGUF file or Hugging Face directory). GGUF weight matrices stay in
// the file's mapping with kStored (the model keeps the file open) or are dequantized to fp32 with
// kF32; safetensors matrices likewise (F32, F16 and BF16 kept as stored in the mapped files).
StatusOr<Model> LoadModel(const std::string& path, WeightStorage storage = WeightStorage::kStored);

// The inverse of WeightStorageName(); InvalidArgument naming the flag for anything else.
StatusOr<WeightStorage> ParseWeightStorage(std::string_view name);

// What a model file holds, read from its headers only (no weight is decoded: cheap for any size).
struct ModelSummary {
  ModelFormat format = ModelFormat::kGguf;
  uint32_t gguf_version = 0;  // 0 for safetensors
  ModelConfig config;
  int64_t parameters = 0;                   // elements over all weight tensors
  std::map<std::string, int> tensor_types;  // storage type name -> tensor count
  // Bytes the loaded weights would take in memory (what WeightBytes() of the loaded model gives),
  // from the tensor table alone: matrices (rank >= 2) at their stored size with
  // WeightStorage::kStored and at 4 bytes per value with kF32; vectors (norms, biases, RoPE
  // factors) at 4 bytes per value either way. For safetensors every tensor of the files counts.
  int64_t stored_weight_bytes = 0;
  int64_t f32_weight_bytes = 0;
  int64_t weight_bytes(WeightStorage storage) const {
    return storage == WeightStorage::kStored ? stored_weight_bytes : f32_weight_bytes;
  }
};
StatusOr<ModelSummary> DescribeModel(const std::string& path);

}  // namespace ripplekv::worker
