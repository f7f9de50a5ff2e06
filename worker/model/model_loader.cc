#include "worker/model/model_loader.h"

#include <filesystem>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "worker/model/gguf_model_loader.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/hf_model_loader.h"
#include "worker/model/safetensors_reader.h"

namespace ripplekv::worker {
namespace {

// The first bytes of every GGUF file; DetectModelFormat reads exactly this many (4 bytes).
constexpr std::string_view kGgufMagic = "GGUF";

}  // namespace

StatusOr<ModelFormat> DetectModelFormat(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat("model not found: ", path));
  }
  if (std::filesystem::is_directory(status)) {
    if (std::filesystem::exists(std::filesystem::path(path) / "config.json")) {
      return ModelFormat::kSafetensorsDir;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a directory without config.json is not a Hugging Face model"));
  }
  // Only the magic number is read, never the (possibly multi-GB) file.
  ASSIGN_OR_RETURN(const std::string magic, ReadFilePrefix(path, kGgufMagic.size()));
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a GGUF file (offset 0: magic is not \"GGUF\") and not a model directory"));
  }
  return ModelFormat::kGguf;
}

StatusOr<ModelSummary> DescribeModel(const std::string& path) {
  ModelSummary summary;
  ASSIGN_OR_RETURN(summary.format, DetectModelFormat(path));
  if (summary.format == ModelFormat::kGguf) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
    ASSIGN_OR_RETURN(summary.config, ReadGgufConfig(*file));
    summary.gguf_version = file->version();
    for (const GgufTensorInfo& t : file->tensors()) {
      int64_t n = 1;
      for (int64_t d : t.dims) n *= d;
      summary.parameters += n;
      ++summary.tensor_types[std::string(kernels::TraitsOf(t.type).name)];
      // The GGUF loader maps matrices as stored and loads vectors as fp32 (gguf_model_loader.cc).
      const bool matrix = t.dims.size() >= 2;
      summary.stored_weight_bytes +=
          matrix ? static_cast<int64_t>(t.size_bytes) : n * int64_t{sizeof(float)};
      summary.f32_weight_bytes += n * int64_t{sizeof(float)};
    }
    return summary;
  }
  ASSIGN_OR_RETURN(summary.config, LoadHfConfig(path));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModelFiles> files, SafetensorsModelFiles::Open(path));
  for (const std::string& name : files->TensorNames()) {
    const SafetensorsTensorInfo* t = files->FindTensor(name);
    const int64_t n = kernels::NumElements(t->shape);
    summary.parameters += n;
    ++summary.tensor_types[std::string(SafetensorsDtypeName(t->dtype))];
    const bool matrix = t->shape.size() >= 2;
    summary.stored_weight_bytes +=
        matrix ? static_cast<int64_t>(t->end - t->begin) : n * int64_t{sizeof(float)};
    summary.f32_weight_bytes += n * int64_t{sizeof(float)};
  }
  return summary;
}

std::string_view WeightStorageName(WeightStorage storage) {
  return storage == WeightStorage::kStored ? "stored" : "f32";
}

StatusOr<WeightStorage> ParseWeightStorage(std::string_view name) {
  if (name == "stored") return WeightStorage::kStored;
  if (name == "f32") return WeightStorage::kF32;
  return absl::InvalidArgumentError(absl::StrCat("--weights: unknown storage \"", std::string(name),
                                                 "\" (expected stored or f32)"));
}

int64_t WeightBytes(const Model& model) {
  auto tensor = [](const kernels::Tensor& t) { return t.numel() * int64_t{sizeof(float)}; };
  int64_t bytes = model.tok_embeddings.MemoryBytes() + model.output.MemoryBytes() +
                  tensor(model.output_norm) + tensor(model.rope_freq_factors);
  for (const LayerWeights& w : model.layers) {
    bytes += tensor(w.attn_norm) + tensor(w.ffn_norm) + tensor(w.bq) + tensor(w.bk) + tensor(w.bv);
    for (const kernels::Weight* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      bytes += m->MemoryBytes();
    }
  }
  return bytes;
}

StatusOr<Model> LoadModel(const std::string& path, WeightStorage storage) {
  ASSIGN_OR_RETURN(ModelFormat format, DetectModelFormat(path));
  if (format == ModelFormat::kSafetensorsDir) return LoadHfModel(path, storage);
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> opened, GgufFile::Open(path));
  // Stored weights point into the file's mapping: the model shares ownership of the file.
  std::shared_ptr<const GgufFile> file = std::move(opened);
  ASSIGN_OR_RETURN(Model model, LoadGgufModel(*file, storage, file));
  model.release_mapped_pages = [file] { file->DropResidentPages(); };
  return model;
}

}  // namespace ripplekv::worker
