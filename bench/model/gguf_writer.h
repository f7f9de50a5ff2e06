#pragma once
// Streaming writer of GGUF v2/v3 files (the format gguf_reader.h reads), for files larger than
// memory: metadata and tensor infos are declared first, the header is written at Open() with
// every tensor's offset computed from its size (each aligned to `alignment`), then the tensors'
// bytes are streamed in declaration order, in pieces of any size. Only a few small buffers are
// held: memory does not grow with the tensor data.
//
// The bytes go to a temporary file next to the destination (`<path>.tmp.<pid>.<n>`, mode 0644
// less the umask) that Finish() fsyncs and renames over `path`, so a reader never sees a
// partial model; a writer destroyed before Finish() removes it.
//
// Usage:
//   GgufStreamWriter w;
//   w.SetString("general.architecture", "llama");
//   RETURN_IF_ERROR(w.AddTensor("token_embd.weight", {d_model, vocab}, GgmlType::kQ4_0));
//   RETURN_IF_ERROR(w.Open(path));
//   RETURN_IF_ERROR(w.Write(bytes));  // repeated until every tensor's bytes are written
//   RETURN_IF_ERROR(w.Finish());
//
// Thread-safety: none; one thread drives a writer.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/dequant/ggml_types.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::bench {

struct GgufWriterOptions {
  uint32_t version = 3;     // GGUF version: 2 or 3 (same layout for what this writer emits)
  uint64_t alignment = 32;  // bytes, a power of two; written as general.alignment when not 32
  bool sync = true;         // fsync the file and its directory in Finish()
};

// One declared tensor and where its data lands.
struct GgufWriterTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: ne[0] (the row) first
  kernels::GgmlType type = kernels::GgmlType::kF32;
  uint64_t offset = 0;      // from the start of the data section; set by AddTensor
  uint64_t size_bytes = 0;  // GgmlBytes(type, product of dims)
};

class GgufStreamWriter {
 public:
  explicit GgufStreamWriter(GgufWriterOptions options = {});
  ~GgufStreamWriter();  // removes the temporary file unless Finish() succeeded
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Metadata, written in the order set. Call before Open(); a key set twice is an error at Open().
  void SetUint32(std::string_view key, uint32_t value);
  void SetInt32(std::string_view key, int32_t value);
  void SetUint64(std::string_view key, uint64_t value);
  void SetFloat32(std::string_view key, float value);
  void SetBool(std::string_view key, bool value);
  void SetString(std::string_view key, std::string_view value);
  void SetStringArray(std::string_view key, std::span<const std::string> values);
  void SetInt32Array(std::string_view key, std::span<const int32_t> values);
  void SetFloat32Array(std::string_view key, std::span<const float> values);

  // Declares a tensor; its data is written after those declared before it. Errors
  // (InvalidArgument, naming the tensor): bad alignment option, after Open(), empty or duplicate
  // name, no dims or more
  // than 4, a dimension < 1, a row (dims[0]) that is not a whole number of the type's blocks, a
  // byte count that overflows.
  [[nodiscard]] Status AddTensor(std::string_view name, std::vector<int64_t> dims,
                                 kernels::GgmlType type);

  // Creates the temporary file and writes the header, metadata, tensor infos and the padding
  // before the data section. Errors: FailedPrecondition (called twice), InvalidArgument (a
  // duplicate metadata key or general.alignment set as metadata, bad options), those of
  // FileErrnoStatus (docs/ERRORS.md) for the file system, naming the temporary path.
  [[nodiscard]] Status Open(const std::string& path);

  // Appends data: the bytes continue the current tensor and run on into the next ones in
  // declaration order (padding between tensors is inserted here). Errors: FailedPrecondition
  // (not open, or finished), InvalidArgument (more bytes than the tensors have left; nothing is
  // written), FileErrnoStatus's for a failed write (ResourceExhausted for a full disk).
  [[nodiscard]] Status Write(std::span<const uint8_t> bytes);

  // Checks that every tensor's bytes were written, flushes, fsyncs (options.sync) and renames
  // the file to the path given to Open(). Errors: FailedPrecondition (not open, data missing:
  // names the tensor), FileErrnoStatus's. On error the temporary file is removed.
  [[nodiscard]] Status Finish();

  const std::vector<GgufWriterTensor>& tensors() const { return tensors_; }
  // The size the finished file will have, in bytes; valid once Open() succeeded.
  uint64_t file_size() const { return data_start_ + data_size_; }
  // Bytes written so far (header included).
  uint64_t bytes_written() const { return written_; }
  // Index of the tensor the next Write() continues (tensors().size() when all are written).
  size_t current_tensor() const { return current_; }

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // u32 type + value
  };
  [[nodiscard]] Status CheckAlignment() const;
  [[nodiscard]] Status Emit(std::span<const uint8_t> bytes);
  [[nodiscard]] Status EmitZeros(uint64_t n);
  [[nodiscard]] Status Flush();
  void Abandon();
  uint64_t AlignUp(uint64_t x) const {
    return (x + options_.alignment - 1) & ~(options_.alignment - 1);
  }

  GgufWriterOptions options_;
  std::vector<Kv> kvs_;
  std::vector<GgufWriterTensor> tensors_;
  uint64_t data_size_ = 0;   // aligned end of the last tensor
  uint64_t data_start_ = 0;  // file offset of the data section
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool finished_ = false;
  std::vector<uint8_t> buffer_;  // small writes are gathered here
  uint64_t written_ = 0;
  size_t current_ = 0;         // tensor being written
  uint64_t current_done_ = 0;  // its bytes written so far
};

}  // namespace ripplekv::bench
