#include "bench/model/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "base/file_io.h"
#include "base/strings.h"
#include "kernels/dequant/dequant.h"

namespace ripplekv::bench {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;  // writes smaller than this are gathered
constexpr size_t kMaxDims = 4;                    // GGML_MAX_DIMS

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));  // little-endian hosts only, as the reader
  out.insert(out.end(), raw, raw + sizeof(T));
}

void PutString(std::vector<uint8_t>& out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<uint8_t> Typed(worker::GgufValueType type) {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, static_cast<uint32_t>(type));
  return out;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

GgufStreamWriter::GgufStreamWriter(GgufWriterOptions options) : options_(options) {}

GgufStreamWriter::~GgufStreamWriter() { Abandon(); }

void GgufStreamWriter::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  tmp_path_.clear();
}

Status GgufStreamWriter::CheckAlignment() const {
  const uint64_t a = options_.alignment;
  if (a == 0 || (a & (a - 1)) != 0 || a > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        Cat("GGUF writer: alignment ", a, " is not a power of two up to 2^30"));
  }
  return absl::OkStatus();
}

void GgufStreamWriter::SetUint32(std::string_view key, uint32_t value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kUint32);
  Put(v, value);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetInt32(std::string_view key, int32_t value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kInt32);
  Put(v, value);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetUint64(std::string_view key, uint64_t value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kUint64);
  Put(v, value);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetFloat32(std::string_view key, float value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kFloat32);
  Put(v, value);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetBool(std::string_view key, bool value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kBool);
  Put<uint8_t>(v, value ? 1 : 0);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetString(std::string_view key, std::string_view value) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kString);
  PutString(v, value);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetStringArray(std::string_view key, std::span<const std::string> values) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kArray);
  Put<uint32_t>(v, static_cast<uint32_t>(worker::GgufValueType::kString));
  Put<uint64_t>(v, values.size());
  for (const std::string& s : values) PutString(v, s);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetInt32Array(std::string_view key, std::span<const int32_t> values) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kArray);
  Put<uint32_t>(v, static_cast<uint32_t>(worker::GgufValueType::kInt32));
  Put<uint64_t>(v, values.size());
  for (int32_t x : values) Put(v, x);
  kvs_.push_back({std::string(key), std::move(v)});
}

void GgufStreamWriter::SetFloat32Array(std::string_view key, std::span<const float> values) {
  std::vector<uint8_t> v = Typed(worker::GgufValueType::kArray);
  Put<uint32_t>(v, static_cast<uint32_t>(worker::GgufValueType::kFloat32));
  Put<uint64_t>(v, values.size());
  for (float x : values) Put(v, x);
  kvs_.push_back({std::string(key), std::move(v)});
}

Status GgufStreamWriter::AddTensor(std::string_view name, std::vector<int64_t> dims,
                                   kernels::GgmlType type) {
  if (fd_ >= 0 || finished_) {
    return absl::InvalidArgumentError(
        Cat("GGUF writer: tensor '", name, "' declared after the file was opened"));
  }
  RETURN_IF_ERROR(CheckAlignment());
  if (name.empty()) return absl::InvalidArgumentError("GGUF writer: empty tensor name");
  for (const GgufWriterTensor& t : tensors_) {
    if (t.name == name) {
      return absl::InvalidArgumentError(Cat("GGUF writer: tensor '", name, "' declared twice"));
    }
  }
  if (dims.empty() || dims.size() > kMaxDims) {
    return absl::InvalidArgumentError(
        Cat("GGUF writer: tensor '", name, "' has ", dims.size(), " dimensions; 1 to 4 allowed"));
  }
  const kernels::GgmlTypeTraits traits = kernels::TraitsOf(type);
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          Cat("GGUF writer: tensor '", name, "' has a dimension ", d, " < 1"));
    }
    if (elements > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          Cat("GGUF writer: tensor '", name, "' has too many elements"));
    }
    elements *= d;
  }
  if (dims[0] % traits.block_elements != 0) {
    return absl::InvalidArgumentError(Cat("GGUF writer: tensor '", name, "' has rows of ", dims[0],
                                          " values, not a whole number of ", traits.block_elements,
                                          "-value ", traits.name, " blocks"));
  }
  StatusOr<int64_t> bytes = kernels::GgmlBytes(type, elements);
  if (!bytes.ok()) {
    return Status(bytes.status().code(),
                  Cat("GGUF writer: tensor '", name, "': ", std::string(bytes.status().message())));
  }
  const uint64_t size = static_cast<uint64_t>(*bytes);
  if (data_size_ > std::numeric_limits<uint64_t>::max() - size - options_.alignment) {
    return absl::InvalidArgumentError("GGUF writer: data section overflows 64 bits");
  }
  GgufWriterTensor t;
  t.name = std::string(name);
  t.dims = std::move(dims);
  t.type = type;
  t.offset = data_size_;
  t.size_bytes = size;
  data_size_ = AlignUp(data_size_ + size);
  tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

Status GgufStreamWriter::Open(const std::string& path) {
  if (fd_ >= 0 || finished_) return absl::FailedPreconditionError("GGUF writer: opened twice");
  if (options_.version != 2 && options_.version != 3) {
    return absl::InvalidArgumentError(
        Cat("GGUF writer: version ", options_.version, " (2 or 3 allowed)"));
  }
  RETURN_IF_ERROR(CheckAlignment());
  std::set<std::string_view> keys;
  for (const Kv& kv : kvs_) {
    if (!keys.insert(kv.key).second) {
      return absl::InvalidArgumentError(Cat("GGUF writer: metadata key '", kv.key, "' set twice"));
    }
  }
  if (keys.contains("general.alignment")) {
    return absl::InvalidArgumentError(
        "GGUF writer: set general.alignment through GgufWriterOptions::alignment");
  }
  if (options_.alignment != 32) {
    SetUint32("general.alignment", static_cast<uint32_t>(options_.alignment));
  }
  std::vector<uint8_t> header;
  header.insert(header.end(), {'G', 'G', 'U', 'F'});
  Put<uint32_t>(header, options_.version);
  Put<uint64_t>(header, tensors_.size());
  Put<uint64_t>(header, kvs_.size());
  for (const Kv& kv : kvs_) {
    PutString(header, kv.key);
    header.insert(header.end(), kv.encoded.begin(), kv.encoded.end());
  }
  for (const GgufWriterTensor& t : tensors_) {
    PutString(header, t.name);
    Put<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(header, static_cast<uint64_t>(d));
    Put<uint32_t>(header, static_cast<uint32_t>(t.type));
    Put<uint64_t>(header, t.offset);
  }
  data_start_ = AlignUp(header.size());
  header.resize(data_start_, 0);

  static std::atomic<uint64_t> counter{0};
  path_ = path;
  tmp_path_ = Cat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int error = errno;
    tmp_path_.clear();  // not ours to remove
    return FileErrnoStatus(error, Cat(path, ".tmp.*"), "create");
  }
  buffer_.reserve(kBufferBytes);
  current_ = 0;
  current_done_ = 0;
  Status s = Emit(header);
  if (!s.ok()) Abandon();
  return s;
}

Status GgufStreamWriter::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileErrnoStatus(errno, tmp_path_, "write");
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

Status GgufStreamWriter::Emit(std::span<const uint8_t> bytes) {
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    written_ += bytes.size();
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Flush());
  if (bytes.size() < kBufferBytes) return Emit(bytes);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileErrnoStatus(errno, tmp_path_, "write");
    }
    done += static_cast<size_t>(n);
  }
  written_ += bytes.size();
  return absl::OkStatus();
}

Status GgufStreamWriter::EmitZeros(uint64_t n) {
  static constexpr uint8_t kZeros[64] = {};
  while (n > 0) {
    const uint64_t step = std::min<uint64_t>(n, sizeof(kZeros));
    RETURN_IF_ERROR(Emit(std::span<const uint8_t>(kZeros, step)));
    n -= step;
  }
  return absl::OkStatus();
}

Status GgufStreamWriter::Write(std::span<const uint8_t> bytes) {
  if (fd_ < 0 || finished_) {
    return absl::FailedPreconditionError("GGUF writer: Write() needs an open, unfinished file");
  }
  uint64_t left = 0;
  for (size_t i = current_; i < tensors_.size(); ++i) {
    left += tensors_[i].size_bytes - (i == current_ ? current_done_ : 0);
  }
  if (bytes.size() > left) {
    return absl::InvalidArgumentError(Cat("GGUF writer: ", bytes.size(),
                                          " bytes written but the tensors have ", left,
                                          " bytes left"));
  }
  while (!bytes.empty()) {
    const GgufWriterTensor& t = tensors_[current_];
    const uint64_t step = std::min<uint64_t>(bytes.size(), t.size_bytes - current_done_);
    Status s = Emit(bytes.first(step));
    if (!s.ok()) {
      Abandon();
      return s;
    }
    bytes = bytes.subspan(step);
    current_done_ += step;
    if (current_done_ == t.size_bytes) {
      // Pad to the next tensor's offset (the last tensor is padded to the aligned end too, as
      // llama.cpp's writer does).
      const uint64_t end = t.offset + t.size_bytes;
      s = EmitZeros(AlignUp(end) - end);
      if (!s.ok()) {
        Abandon();
        return s;
      }
      ++current_;
      current_done_ = 0;
    }
  }
  return absl::OkStatus();
}

Status GgufStreamWriter::Finish() {
  if (fd_ < 0 || finished_) {
    return absl::FailedPreconditionError("GGUF writer: Finish() needs an open, unfinished file");
  }
  if (current_ < tensors_.size()) {
    const GgufWriterTensor& t = tensors_[current_];
    const Status s = absl::FailedPreconditionError(
        Cat("GGUF writer: tensor '", t.name, "' has ", current_done_, " of its ", t.size_bytes,
            " bytes; ", tensors_.size() - current_ - 1, " more tensors follow"));
    Abandon();
    return s;
  }
  auto fail = [this](Status s) {
    Abandon();
    return s;
  };
  if (Status s = Flush(); !s.ok()) return fail(s);
  if (options_.sync && ::fsync(fd_) != 0) return fail(FileErrnoStatus(errno, tmp_path_, "fsync"));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return fail(FileErrnoStatus(errno, tmp_path_, "close"));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return fail(FileErrnoStatus(errno, path_, Cat("rename ", tmp_path_, " to it")));
  }
  finished_ = true;
  tmp_path_.clear();
  if (options_.sync) {
    const int dir = ::open(DirectoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  return absl::OkStatus();
}

}  // namespace ripplekv::bench
