#pragma once
// A tiny GGUF writer for tests: builds files byte by byte so tests can make valid files of any
// shape and then break them on purpose. Not a production writer (no streaming, no validation).

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dequant/ggml_types.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::worker::testing {

// Little-endian byte sink.
class ByteSink {
 public:
  template <typename T>
  ByteSink& Put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  ByteSink& PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  ByteSink& PutBytes(const std::vector<uint8_t>& b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class GgufWriter {
 public:
  GgufWriter& Version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // Adds general.alignment (uint32) and lays the data section out with it.
  GgufWriter& Alignment(uint32_t a) {
    alignment_ = a;
    return U32("general.alignment", a);
  }

  // A key with an already encoded value (any type id, even invalid ones).
  GgufWriter& RawKv(std::string key, uint32_t type, std::vector<uint8_t> encoded_value) {
    kvs_.push_back({std::move(key), type, std::move(encoded_value)});
    return *this;
  }
  template <typename T>
  GgufWriter& Scalar(std::string key, GgufValueType type, T v) {
    ByteSink s;
    s.Put<T>(v);
    return RawKv(std::move(key), static_cast<uint32_t>(type), s.bytes());
  }
  GgufWriter& U8(std::string k, uint8_t v) { return Scalar(k, GgufValueType::kUint8, v); }
  GgufWriter& I8(std::string k, int8_t v) { return Scalar(k, GgufValueType::kInt8, v); }
  GgufWriter& U16(std::string k, uint16_t v) { return Scalar(k, GgufValueType::kUint16, v); }
  GgufWriter& I16(std::string k, int16_t v) { return Scalar(k, GgufValueType::kInt16, v); }
  GgufWriter& U32(std::string k, uint32_t v) { return Scalar(k, GgufValueType::kUint32, v); }
  GgufWriter& I32(std::string k, int32_t v) { return Scalar(k, GgufValueType::kInt32, v); }
  GgufWriter& U64(std::string k, uint64_t v) { return Scalar(k, GgufValueType::kUint64, v); }
  GgufWriter& I64(std::string k, int64_t v) { return Scalar(k, GgufValueType::kInt64, v); }
  GgufWriter& F32(std::string k, float v) { return Scalar(k, GgufValueType::kFloat32, v); }
  GgufWriter& F64(std::string k, double v) { return Scalar(k, GgufValueType::kFloat64, v); }
  GgufWriter& Bool(std::string k, bool v) {
    return Scalar(k, GgufValueType::kBool, static_cast<uint8_t>(v ? 1 : 0));
  }
  GgufWriter& String(std::string k, std::string_view v) {
    ByteSink s;
    s.PutString(v);
    return RawKv(std::move(k), static_cast<uint32_t>(GgufValueType::kString), s.bytes());
  }
  GgufWriter& StringArray(std::string k, const std::vector<std::string>& v) {
    ByteSink s;
    s.Put<uint32_t>(static_cast<uint32_t>(GgufValueType::kString)).Put<uint64_t>(v.size());
    for (const std::string& e : v) s.PutString(e);
    return RawKv(std::move(k), static_cast<uint32_t>(GgufValueType::kArray), s.bytes());
  }
  template <typename T>
  GgufWriter& ScalarArray(std::string k, GgufValueType element_type, const std::vector<T>& v) {
    ByteSink s;
    s.Put<uint32_t>(static_cast<uint32_t>(element_type)).Put<uint64_t>(v.size());
    for (const T& e : v) s.Put<T>(e);
    return RawKv(std::move(k), static_cast<uint32_t>(GgufValueType::kArray), s.bytes());
  }

  // A tensor whose data the writer places at the next aligned offset. `dims` are GGUF order
  // (ne[0] first).
  GgufWriter& Tensor(std::string name, std::vector<uint64_t> dims, kernels::GgmlType type,
                     std::vector<uint8_t> data) {
    tensors_.push_back({std::move(name), std::move(dims), static_cast<uint32_t>(type), 0,
                        /*auto_offset=*/true, std::move(data)});
    return *this;
  }
  GgufWriter& TensorF32(std::string name, std::vector<uint64_t> dims,
                        const std::vector<float>& values) {
    ByteSink s;
    for (float v : values) s.Put<float>(v);
    return Tensor(std::move(name), std::move(dims), kernels::GgmlType::kF32, s.bytes());
  }
  // A tensor info only, with whatever type id and offset the test wants; no data is written.
  GgufWriter& TensorInfoOnly(std::string name, std::vector<uint64_t> dims, uint32_t raw_type,
                             uint64_t offset) {
    tensors_.push_back({std::move(name), std::move(dims), raw_type, offset, false, {}});
    return *this;
  }

  std::vector<uint8_t> Build() const {
    ByteSink s;
    s.PutBytes({'G', 'G', 'U', 'F'});
    s.Put<uint32_t>(version_).Put<uint64_t>(tensors_.size()).Put<uint64_t>(kvs_.size());
    for (const Kv& kv : kvs_) {
      s.PutString(kv.key).Put<uint32_t>(kv.type).PutBytes(kv.value);
    }
    // Lay out auto-placed tensor data back to back, each start aligned.
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TensorEntry& t : tensors_) {
      if (!t.auto_offset) {
        offsets.push_back(t.offset);
        continue;
      }
      offsets.push_back(next);
      next = AlignUp(next + t.data.size());
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const TensorEntry& t = tensors_[i];
      s.PutString(t.name).Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) s.Put<uint64_t>(d);
      s.Put<uint32_t>(t.type).Put<uint64_t>(offsets[i]);
    }
    if (tensors_.empty()) return s.bytes();
    std::vector<uint8_t>& out = s.bytes();
    out.resize(AlignUp(out.size()), 0);
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (!tensors_[i].auto_offset) continue;
      out.resize(data_start + offsets[i], 0);
      out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    out.resize(data_start + AlignUp(out.size() - data_start), 0);
    return out;
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;
  };
  struct TensorEntry {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t offset;
    bool auto_offset;
    std::vector<uint8_t> data;
  };

  uint64_t AlignUp(uint64_t x) const { return (x + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<TensorEntry> tensors_;
};

// Position of the first occurrence of `needle` in `bytes` (for patching fields), or npos.
inline size_t FindBytes(const std::vector<uint8_t>& bytes, std::string_view needle) {
  for (size_t i = 0; i + needle.size() <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, needle.data(), needle.size()) == 0) return i;
  }
  return std::string_view::npos;
}

template <typename T>
void Patch(std::vector<uint8_t>& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

inline void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

}  // namespace ripplekv::worker::testing
