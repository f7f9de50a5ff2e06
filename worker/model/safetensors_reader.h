#pragma once
// Reader for Hugging Face safetensors files over a read-only mmap, and for a model directory that
// holds one `model.safetensors` or a sharded set described by `model.safetensors.index.json`.
//
// File layout: u64 little-endian header length N, then N bytes of UTF-8 JSON (an object), then the
// data section. Each JSON entry other than `__metadata__` describes one tensor:
//   "name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}
// with offsets relative to the start of the data section, end exclusive, row-major data.
//
// Open() validates the whole header up front: N fits the file and is at most kMaxHeaderBytes, the
// JSON parses (errors name the file and byte offset), every tensor has a known dtype, a shape of
// non-negative integers and [begin, end) inside the data section with end - begin ==
// product(shape) * dtype size (overflow-checked), no two tensors overlap and no name repeats. After
// a successful Open() every TensorData() span is in bounds, so a malformed file yields a Status,
// never a crash or an allocation larger than the file.
// A SafetensorsFile / SafetensorsModelFiles is immutable after Open() and safe to read from several
// threads.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::worker {

// Every dtype of the safetensors format. Open() accepts all of them (so a file with, say, an I64
// buffer still opens); LoadTensor() converts only kF32, kF16 and kBF16.
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// The name as written in the file ("F32", "BF16", ...).
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// The GGML type of the same encoding, for the dtypes that load (kF32, kF16, kBF16); nullopt for
// the others.
std::optional<kernels::GgmlType> GgmlTypeOf(SafetensorsDtype dtype);
// Bytes per element.
size_t SafetensorsDtypeSize(SafetensorsDtype dtype);

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  kernels::Shape shape;  // row-major, as in the file; {} is a scalar
  uint64_t begin = 0;    // byte offset from the start of the data section
  uint64_t end = 0;      // exclusive; end - begin == numel * dtype size
  uint64_t size_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Largest JSON header accepted, bytes (the reference implementation uses the same bound).
  static constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

  // Maps `path` and parses and validates its header. Errors (docs/ERRORS.md): FileErrnoStatus's
  // for a failed open/fstat/mmap (NotFound when there is no such file), InvalidArgument (not a
  // regular file; malformed header: the message names the path, the tensor/field and, for JSON
  // syntax errors, the byte offset in the file), Unimplemented (a dtype string that is not in the
  // safetensors format, naming tensor and dtype).
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Same, over bytes the caller keeps alive for the life of the SafetensorsFile.
  static StatusOr<std::unique_ptr<SafetensorsFile>> FromBuffer(std::span<const uint8_t> bytes,
                                                               std::string display_name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensorInfo* FindTensor(std::string_view name) const;

  // Raw little-endian bytes of a tensor (size_bytes() long), inside the mapping.
  std::span<const uint8_t> TensorData(const SafetensorsTensorInfo& info) const;

  // Converts a tensor to an owning fp32 Tensor of the same shape (a scalar becomes shape {}).
  // Errors: NotFound (no such tensor; names file and tensor), Unimplemented (dtype other than
  // F32/F16/BF16; names tensor and dtype).
  StatusOr<kernels::Tensor> LoadTensor(std::string_view name) const;
  StatusOr<kernels::Tensor> LoadTensor(const SafetensorsTensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  Status Parse();

  std::string path_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::span<const uint8_t> bytes_;
  std::span<const uint8_t> data_section_;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null for FromBuffer
};

// The weight files of a Hugging Face model directory, and tensor lookup across them.
class SafetensorsModelFiles {
 public:
  static constexpr const char* kSingleFileName = "model.safetensors";
  static constexpr const char* kIndexFileName = "model.safetensors.index.json";

  // Opens `dir`. As in transformers, `model.safetensors` is used when present; otherwise
  // `model.safetensors.index.json` ({"weight_map": {tensor: shard file name}}) names the shards.
  // Errors: NotFound (neither file; a shard named by the index is missing), InvalidArgument
  // (malformed index or shard; a shard name that is not a plain file name; a tensor the index
  // assigns to a shard that lacks it; a tensor name present in two shards), ResourceExhausted
  // (an index over kMaxHeaderBytes), plus SafetensorsFile errors. Every message names the file at
  // fault.
  static StatusOr<std::unique_ptr<SafetensorsModelFiles>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // True when loaded through the index.
  bool sharded() const { return sharded_; }
  // Weight file names (relative to dir), byte-wise sorted: {"model.safetensors"} or the shards.
  const std::vector<std::string>& file_names() const { return file_names_; }
  // The opened files, in file_names() order.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // Every tensor name across the files, sorted.
  std::vector<std::string> TensorNames() const;
  // nullptr when absent.
  const SafetensorsTensorInfo* FindTensor(std::string_view name) const;
  // As SafetensorsFile::LoadTensor; NotFound names the tensor and the directory.
  StatusOr<kernels::Tensor> LoadTensor(std::string_view name) const;
  // The raw bytes of a tensor, inside its file's mapping (valid while this object lives);
  // NotFound as LoadTensor.
  StatusOr<std::span<const uint8_t>> TensorData(std::string_view name) const;

 private:
  SafetensorsModelFiles() = default;
  struct Location {
    const SafetensorsFile* file;
    const SafetensorsTensorInfo* info;
  };
  std::string dir_;
  bool sharded_ = false;
  std::vector<std::string> file_names_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Location, std::less<>> by_name_;
};

// The weight files `SafetensorsModelFiles::Open(dir)` would read, without opening them: the
// byte-wise sorted file names and whether they come from the index. Used by the model hash so
// that identity covers exactly the loaded weights. Errors as for the index part of Open().
struct SafetensorsWeightFiles {
  std::vector<std::string> names;  // relative to the directory, sorted, unique
  bool sharded = false;
};
StatusOr<SafetensorsWeightFiles> ListSafetensorsWeightFiles(const std::string& dir);

}  // namespace ripplekv::worker
