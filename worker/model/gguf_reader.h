#pragma once
// Reader for GGUF v2/v3 model files (the llama.cpp format) over a read-only mmap.
//
// Layout (all little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count, then
// kv_count metadata pairs (gguf string key, u32 value type, value), then tensor_count tensor infos
// (name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset), then padding to
// `general.alignment` (default 32) and the tensor data section. Tensor offsets are relative to the
// start of the data section.
//
// Open() validates everything up front: every length, count and offset is checked against the file
// size before it is used, so a malformed file yields an InvalidArgument/DataLoss Status naming the
// file, the field and the byte offset, never a crash or an allocation larger than the file.
// A GgufFile is immutable after Open() and safe to read from several threads.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::worker {

// GGUF metadata value types, numbered as in the file format.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

struct GgufArray;

// One metadata value. Integers keep their signedness in the variant alternative chosen
// (uint64_t for unsigned types, int64_t for signed ones); `type` keeps the exact file type.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> value;
};

struct GgufArray {
  GgufValueType element_type = GgufValueType::kUint8;
  std::vector<GgufValue> elements;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne[0] first: ne[0] is the contiguous (row) dimension
  kernels::GgmlType type;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t size_bytes = 0;  // computed from dims and type; validated against the file
};

class GgufFile {
 public:
  // Maps `path` and parses header, metadata and tensor table. Errors (docs/ERRORS.md):
  // FileErrnoStatus's for a failed open/fstat/mmap (NotFound when there is no such file),
  // InvalidArgument (not a regular file; bad magic/version, malformed field: message names path,
  // field, offset), DataLoss (empty or truncated: a field or tensor runs past the end),
  // Unimplemented (a tensor type we do not read, named).
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Same, over bytes the caller keeps alive for the life of the GgufFile (used by the fuzzer).
  static StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::span<const uint8_t> bytes,
                                                        std::string display_name);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: NotFound if absent, InvalidArgument if the stored type does not convert.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;   // any integer type, range-checked
  StatusOr<double> GetFloat(std::string_view key) const;  // float32/float64 (and integers)
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Drops the mapping's resident pages from this process (a read-only file mapping: they are
  // read again from the file on next use). No-op for FromBuffer files.
  void DropResidentPages() const;

  // Raw bytes of a tensor (size_bytes long), inside the mapping.
  std::span<const uint8_t> TensorData(const GgufTensorInfo& info) const;

  // Dequantizes a tensor to fp32, shape reversed to row-major ({ne[1], ne[0]} for a matrix).
  StatusOr<kernels::Tensor> LoadTensor(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::span<const uint8_t> bytes_;
  std::span<const uint8_t> data_section_;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null for FromBuffer
};

}  // namespace ripplekv::worker
