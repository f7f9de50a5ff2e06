#include "worker/model/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "base/check.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "kernels/dequant/dequant.h"

namespace ripplekv::worker {

// A read-only private mapping of the whole file; unmapped when the GgufFile goes away.
struct GgufFile::Mapping {
  void* address = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (address != nullptr) munmap(address, size);
  }
};

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// GGML_MAX_NAME is 64 bytes including the terminating NUL.
constexpr uint64_t kMaxTensorNameBytes = 63;
// The GGUF specification caps keys at 65535 bytes.
constexpr uint64_t kMaxKeyBytes = 65535;
// Arrays of arrays are legal but unused by real models; the cap keeps recursion shallow.
constexpr int kMaxArrayDepth = 4;
// Every value costs at least one byte of file, but a parsed value costs far more memory than
// that; this bounds the total (a 256k-token vocabulary with scores, types and merges is ~1M).
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 23;
// Smallest encodings, used to reject counts that cannot fit in the bytes left before allocating.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;  // key length, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes =
    8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, offset

std::string_view ValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

// Bytes of one encoded value of `type`, or the least it can take (strings, arrays).
uint64_t MinEncodedBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
      return 8;  // length
    case GgufValueType::kArray:
      return 4 + 8;  // element type, count
  }
  return 1;
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

// What a successful parse yields; copied into the GgufFile.
struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  std::map<std::string, GgufValue, std::less<>> metadata;
  std::vector<GgufTensorInfo> tensors;
  std::span<const uint8_t> data_section;
};

// Walks the bytes once, front to back. Every read is bounds-checked first; every error names the
// file, the field and the byte offset where that field starts.
class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, std::string_view path) : bytes_(bytes), path_(path) {}

  StatusOr<Parsed> Parse() {
    Parsed out;
    RETURN_IF_ERROR(ParseHeader(&out));
    RETURN_IF_ERROR(ParseMetadata(&out));
    RETURN_IF_ERROR(ParseTensorInfos(&out));
    RETURN_IF_ERROR(LocateData(&out));
    return out;
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Malformed(std::string_view field, uint64_t offset, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(path_, ": ", field, " at byte ", offset, ": ", what));
  }
  Status Truncated(std::string_view field, uint64_t offset, uint64_t needed) const {
    return absl::DataLossError(Cat(path_, ": ", field, " at byte ", offset, ": needs ", needed,
                                   " bytes but the file ends at byte ", bytes_.size(),
                                   " (truncated?)"));
  }

  Status Need(std::string_view field, uint64_t n) const {
    if (n > remaining()) return Truncated(field, pos_, n);
    return absl::OkStatus();
  }

  template <typename T>
  T Take() {  // caller checked Need()
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  template <typename T>
  Status Read(std::string_view field, T* out) {
    static_assert(std::endian::native == std::endian::little, "GGUF is little-endian");
    RETURN_IF_ERROR(Need(field, sizeof(T)));
    *out = Take<T>();
    return absl::OkStatus();
  }

  // A GGUF string: u64 length, then that many bytes (no terminator). `field()` names the string
  // for messages; it is only called on error, keeping long token lists cheap to parse.
  template <typename FieldFn>
  Status ReadString(const FieldFn& field, uint64_t max_len, std::string* out) {
    const uint64_t at = pos_;
    if (remaining() < sizeof(uint64_t)) return Truncated(field() + " length", at, 8);
    const uint64_t len = Take<uint64_t>();
    if (len > remaining()) {
      return Malformed(field() + " length", at,
                       Cat("string of ", len, " bytes runs past the end of the file (", remaining(),
                           " bytes left)"));
    }
    if (len > max_len) {
      return Malformed(field() + " length", at,
                       Cat("string of ", len, " bytes exceeds the limit of ", max_len));
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  Status ParseHeader(Parsed* out) {
    RETURN_IF_ERROR(Need("magic", 4));
    if (std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
      return Malformed("magic", 0,
                       fmt::format("expected \"GGUF\", got bytes {:02x} {:02x} {:02x} {:02x}",
                                   bytes_[0], bytes_[1], bytes_[2], bytes_[3]));
    }
    pos_ = 4;
    uint32_t version = 0;
    RETURN_IF_ERROR(Read("version", &version));
    if (version == 1) {
      return Malformed("version", 4,
                       "GGUF version 1 (32-bit counts) is not supported; re-convert the model "
                       "with a current llama.cpp (versions 2 and 3 are read)");
    }
    if (version == 0x02000000u || version == 0x03000000u) {
      return Malformed("version", 4, "big-endian GGUF files are not supported");
    }
    if (version != 2 && version != 3) {
      return Malformed("version", 4,
                       Cat("unsupported GGUF version ", version, "; supported: 2, 3"));
    }
    out->version = version;
    RETURN_IF_ERROR(Read("tensor_count", &tensor_count_));
    RETURN_IF_ERROR(Read("kv_count", &kv_count_));
    if (kv_count_ > remaining() / kMinKvBytes) {
      return Malformed(
          "kv_count", 16,
          Cat(kv_count_, " key-value pairs cannot fit in the ", remaining(), " bytes left"));
    }
    if (tensor_count_ > remaining() / kMinTensorInfoBytes) {
      return Malformed(
          "tensor_count", 8,
          Cat(tensor_count_, " tensor infos cannot fit in the ", remaining(), " bytes left"));
    }
    return absl::OkStatus();
  }

  Status ParseMetadata(Parsed* out) {
    for (uint64_t i = 0; i < kv_count_; ++i) {
      const uint64_t key_at = pos_;
      std::string key;
      RETURN_IF_ERROR(ReadString([&] { return Cat("metadata key #", i); }, kMaxKeyBytes, &key));
      if (key.empty()) return Malformed(Cat("metadata key #", i), key_at, "empty key");
      if (out->metadata.contains(key)) {
        return Malformed(Cat("metadata key '", key, "'"), key_at, "duplicate key");
      }
      key_ = key;
      index_path_.clear();
      const uint64_t type_at = pos_;
      uint32_t raw_type = 0;
      RETURN_IF_ERROR(Read(Field("type"), &raw_type));
      if (raw_type > static_cast<uint32_t>(GgufValueType::kFloat64)) {
        return Malformed(Field("type"), type_at, Cat("unknown value type ", raw_type));
      }
      const uint64_t value_at = pos_;
      GgufValue value;
      RETURN_IF_ERROR(ReadValue(static_cast<GgufValueType>(raw_type), /*depth=*/0, &value));
      if (key == "general.alignment") {
        RETURN_IF_ERROR(CheckAlignment(value, value_at, &out->alignment));
      }
      out->metadata.emplace(std::move(key), std::move(value));
    }
    return absl::OkStatus();
  }

  // "metadata 'key'[3][1] <what>", built only when needed (errors and the rare nested read).
  std::string Field(std::string_view what) const {
    std::string s = Cat("metadata '", key_, "'");
    for (uint64_t i : index_path_) s += Cat("[", i, "]");
    if (!what.empty()) s += Cat(" ", what);
    return s;
  }

  Status ReadValue(GgufValueType type, int depth, GgufValue* out) {
    if (++values_read_ > kMaxMetadataValues) {
      return Malformed(Field("value"), pos_,
                       Cat("more than ", kMaxMetadataValues, " metadata values"));
    }
    out->type = type;
    const uint64_t at = pos_;
    const uint64_t size = MinEncodedBytes(type);
    if (type != GgufValueType::kString && type != GgufValueType::kArray) {
      if (size > remaining()) return Truncated(Field("value"), at, size);
    }
    switch (type) {
      case GgufValueType::kUint8:
        out->value = uint64_t{Take<uint8_t>()};
        break;
      case GgufValueType::kUint16:
        out->value = uint64_t{Take<uint16_t>()};
        break;
      case GgufValueType::kUint32:
        out->value = uint64_t{Take<uint32_t>()};
        break;
      case GgufValueType::kUint64:
        out->value = Take<uint64_t>();
        break;
      case GgufValueType::kInt8:
        out->value = int64_t{Take<int8_t>()};
        break;
      case GgufValueType::kInt16:
        out->value = int64_t{Take<int16_t>()};
        break;
      case GgufValueType::kInt32:
        out->value = int64_t{Take<int32_t>()};
        break;
      case GgufValueType::kInt64:
        out->value = Take<int64_t>();
        break;
      case GgufValueType::kFloat32:
        out->value = double{Take<float>()};
        break;
      case GgufValueType::kFloat64:
        out->value = Take<double>();
        break;
      case GgufValueType::kBool: {
        const uint8_t b = Take<uint8_t>();
        if (b > 1) return Malformed(Field("bool"), at, Cat("byte ", b, " is not 0 or 1"));
        out->value = b == 1;
        break;
      }
      case GgufValueType::kString: {
        std::string s;
        RETURN_IF_ERROR(
            ReadString([&] { return Field("string"); }, std::numeric_limits<uint64_t>::max(), &s));
        out->value = std::move(s);
        break;
      }
      case GgufValueType::kArray: {
        auto array = std::make_shared<GgufArray>();
        RETURN_IF_ERROR(ReadArray(depth, array.get()));
        out->value = std::move(array);
        break;
      }
    }
    return absl::OkStatus();
  }

  Status ReadArray(int depth, GgufArray* array) {
    const uint64_t type_at = pos_;
    uint32_t raw_type = 0;
    RETURN_IF_ERROR(Read(Field("array element type"), &raw_type));
    if (raw_type > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return Malformed(Field("array element type"), type_at, Cat("unknown value type ", raw_type));
    }
    const auto element_type = static_cast<GgufValueType>(raw_type);
    if (element_type == GgufValueType::kArray && depth + 1 >= kMaxArrayDepth) {
      return Malformed(Field("array element type"), type_at,
                       Cat("arrays nested deeper than ", kMaxArrayDepth));
    }
    const uint64_t count_at = pos_;
    uint64_t count = 0;
    RETURN_IF_ERROR(Read(Field("array count"), &count));
    const uint64_t min_bytes = MinEncodedBytes(element_type);
    if (count > remaining() / min_bytes) {
      return Malformed(Field("array count"), count_at,
                       Cat(count, " ", ValueTypeName(element_type), " elements cannot fit in the ",
                           remaining(), " bytes left"));
    }
    if (count > kMaxMetadataValues - std::min(values_read_, kMaxMetadataValues)) {
      return Malformed(
          Field("array count"), count_at,
          Cat(count, " elements exceed the limit of ", kMaxMetadataValues, " metadata values"));
    }
    array->element_type = element_type;
    array->elements.resize(count);
    index_path_.push_back(0);
    for (uint64_t i = 0; i < count; ++i) {
      index_path_.back() = i;
      RETURN_IF_ERROR(ReadValue(element_type, depth + 1, &array->elements[i]));
    }
    index_path_.pop_back();
    return absl::OkStatus();
  }

  Status CheckAlignment(const GgufValue& value, uint64_t at, uint64_t* alignment) {
    constexpr std::string_view kField = "metadata 'general.alignment'";
    if (!IsUnsigned(value.type) && !IsSigned(value.type)) {
      return Malformed(kField, at, Cat("must be an integer, got ", ValueTypeName(value.type)));
    }
    if (IsSigned(value.type) && std::get<int64_t>(value.value) <= 0) {
      return Malformed(kField, at,
                       Cat(std::get<int64_t>(value.value), " is not a positive power of two"));
    }
    const uint64_t a = IsUnsigned(value.type)
                           ? std::get<uint64_t>(value.value)
                           : static_cast<uint64_t>(std::get<int64_t>(value.value));
    if (!std::has_single_bit(a)) {
      return Malformed(kField, at, Cat(a, " is not a positive power of two"));
    }
    *alignment = a;
    return absl::OkStatus();
  }

  Status ParseTensorInfos(Parsed* out) {
    std::set<std::string, std::less<>> names;
    out->tensors.reserve(tensor_count_);
    offset_fields_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      GgufTensorInfo info;
      const std::string index_field = Cat("tensor #", i, " name");
      const uint64_t name_at = pos_;
      RETURN_IF_ERROR(ReadString([&] { return index_field; }, kMaxTensorNameBytes, &info.name));
      if (info.name.empty()) return Malformed(index_field, name_at, "empty tensor name");
      if (names.contains(info.name)) {
        return Malformed(Cat("tensor '", info.name, "' name"), name_at, "duplicate tensor name");
      }
      names.insert(info.name);
      const std::string field = Cat("tensor '", info.name, "'");

      const uint64_t n_dims_at = pos_;
      uint32_t n_dims = 0;
      RETURN_IF_ERROR(Read(Cat(field, " n_dims"), &n_dims));
      if (n_dims == 0 || n_dims > kMaxDims) {
        return Malformed(Cat(field, " n_dims"), n_dims_at,
                         Cat(n_dims, " dimensions; must be 1 to ", kMaxDims));
      }
      int64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim_at = pos_;
        const std::string dim_field = Cat(field, " dim ", d);
        uint64_t dim = 0;
        RETURN_IF_ERROR(Read(dim_field, &dim));
        if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Malformed(dim_field, dim_at, Cat(dim, " is not a positive size"));
        }
        if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
          return Malformed(dim_field, dim_at, "element count overflows 64 bits");
        }
        info.dims.push_back(static_cast<int64_t>(dim));
      }

      const uint64_t type_at = pos_;
      uint32_t raw_type = 0;
      RETURN_IF_ERROR(Read(Cat(field, " type"), &raw_type));
      StatusOr<kernels::GgmlTypeTraits> traits = kernels::TraitsOf(raw_type);
      if (!traits.ok()) {
        return Status(traits.status().code(), Cat(path_, ": ", field, " type at byte ", type_at,
                                                  ": ", std::string(traits.status().message())));
      }
      info.type = static_cast<kernels::GgmlType>(raw_type);
      StatusOr<int64_t> bytes = kernels::GgmlBytes(info.type, elements);
      if (!bytes.ok() || info.dims[0] % traits->block_elements != 0) {
        return Malformed(
            Cat(field, " dim 0"), n_dims_at + 4,
            Cat("row of ", info.dims[0], " is not a whole number of ", traits->block_elements,
                "-value ", traits->name, " blocks, or the byte size overflows"));
      }
      info.size_bytes = static_cast<uint64_t>(*bytes);

      const uint64_t offset_at = pos_;
      RETURN_IF_ERROR(Read(Cat(field, " offset"), &info.offset));
      offset_fields_.push_back(offset_at);
      out->tensors.push_back(std::move(info));
    }
    return absl::OkStatus();
  }

  // The data section starts at the first multiple of the alignment after the tensor infos.
  Status LocateData(Parsed* out) {
    const uint64_t alignment = out->alignment;
    uint64_t start = pos_;
    const uint64_t rest = pos_ % alignment;
    if (rest != 0) {
      const uint64_t pad = alignment - rest;
      start = pad > remaining() ? bytes_.size() + 1 : pos_ + pad;
    }
    if (start > bytes_.size()) {
      if (!out->tensors.empty()) {
        return absl::DataLossError(
            Cat(path_, ": tensor data section at byte ", pos_, ": padding to the ", alignment,
                "-byte alignment runs past the end of the file (", bytes_.size(), " bytes)"));
      }
      out->data_section = {};
      return absl::OkStatus();
    }
    out->data_section = bytes_.subspan(start);
    const uint64_t data_size = out->data_section.size();
    for (size_t i = 0; i < out->tensors.size(); ++i) {
      const GgufTensorInfo& t = out->tensors[i];
      const std::string field = Cat("tensor '", t.name, "' offset");
      if (t.offset % alignment != 0) {
        return Malformed(field, offset_fields_[i],
                         Cat(t.offset, " is not a multiple of the alignment ", alignment));
      }
      if (t.offset > data_size || t.size_bytes > data_size - t.offset) {
        return absl::DataLossError(Cat(path_, ": ", field, " at byte ", offset_fields_[i],
                                       ": data [", t.offset, ", +", t.size_bytes,
                                       ") runs past the end of the data section (", data_size,
                                       " bytes from byte ", start, "; truncated?)"));
      }
    }
    // Overlapping tensors mean a corrupt table (every tensor owns its bytes).
    std::vector<size_t> order(out->tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out->tensors[a].offset < out->tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = out->tensors[order[k - 1]];
      const GgufTensorInfo& cur = out->tensors[order[k]];
      if (cur.offset < prev.offset + prev.size_bytes) {
        return Malformed(Cat("tensor '", cur.name, "' offset"), offset_fields_[order[k]],
                         Cat("data overlaps tensor '", prev.name, "'"));
      }
    }
    return absl::OkStatus();
  }

  std::span<const uint8_t> bytes_;
  std::string_view path_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t values_read_ = 0;
  std::string key_;                      // key being parsed, for messages
  std::vector<uint64_t> index_path_;     // array indices being parsed, for messages
  std::vector<uint64_t> offset_fields_;  // byte offset of each tensor's offset field
};

}  // namespace

GgufFile::~GgufFile() = default;

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileErrnoStatus(errno, path, "open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FileErrnoStatus(err, path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(Cat(path, ": not a regular file"));
  }
  if (st.st_size == 0) {
    ::close(fd);
    return absl::DataLossError(Cat(path, ": magic at byte 0: the file is empty"));
  }
  auto mapping = std::make_unique<Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  void* address = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (address == MAP_FAILED)
    return FileErrnoStatus(err, path, Cat("map ", mapping->size, " bytes"));
  mapping->address = address;
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(address), mapping->size);
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, FromBuffer(bytes, path));
  file->mapping_ = std::move(mapping);
  return file;
}

void GgufFile::DropResidentPages() const {
  if (mapping_ != nullptr) ::madvise(mapping_->address, mapping_->size, MADV_DONTNEED);
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::span<const uint8_t> bytes,
                                                         std::string display_name) {
  Parser parser(bytes, display_name);
  ASSIGN_OR_RETURN(Parsed parsed, parser.Parse());
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(display_name);
  file->version_ = parsed.version;
  file->alignment_ = parsed.alignment;
  file->metadata_ = std::move(parsed.metadata);
  file->tensors_ = std::move(parsed.tensors);
  file->bytes_ = bytes;
  file->data_section_ = parsed.data_section;
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

Status Missing(const std::string& path, std::string_view key) {
  return absl::NotFoundError(Cat(path, ": metadata key '", key, "' is missing"));
}

Status WrongType(const std::string& path, std::string_view key, GgufValueType got,
                 std::string_view expected) {
  return absl::InvalidArgumentError(
      Cat(path, ": metadata '", key, "' is ", ValueTypeName(got), ", expected ", expected));
}

// Integer value of a scalar, range-checked into int64.
StatusOr<int64_t> AsInt(const GgufValue& v, const std::string& path, std::string_view key) {
  if (IsSigned(v.type)) return std::get<int64_t>(v.value);
  if (IsUnsigned(v.type)) {
    const uint64_t u = std::get<uint64_t>(v.value);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          Cat(path, ": metadata '", key, "' value ", u, " does not fit in int64"));
    }
    return static_cast<int64_t>(u);
  }
  return WrongType(path, key, v.type, "an integer");
}

StatusOr<double> AsFloat(const GgufValue& v, const std::string& path, std::string_view key) {
  if (IsFloat(v.type)) return std::get<double>(v.value);
  if (IsSigned(v.type)) return static_cast<double>(std::get<int64_t>(v.value));
  if (IsUnsigned(v.type)) return static_cast<double>(std::get<uint64_t>(v.value));
  return WrongType(path, key, v.type, "a number");
}

StatusOr<const GgufArray*> AsArray(const GgufValue& v, const std::string& path,
                                   std::string_view key) {
  if (v.type != GgufValueType::kArray) return WrongType(path, key, v.type, "an array");
  return std::get<std::shared_ptr<GgufArray>>(v.value).get();
}

}  // namespace

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufValueType::kString) return WrongType(path_, key, v->type, "a string");
  return std::get<std::string>(v->value);
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  return AsInt(*v, path_, key);
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  return AsFloat(*v, path_, key);
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufValueType::kBool) return WrongType(path_, key, v->type, "a bool");
  return std::get<bool>(v->value);
}

StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  ASSIGN_OR_RETURN(const GgufArray* array, AsArray(*v, path_, key));
  if (array->element_type != GgufValueType::kString) {
    return absl::InvalidArgumentError(Cat(path_, ": metadata '", key, "' is an array of ",
                                          ValueTypeName(array->element_type),
                                          ", expected an array of string"));
  }
  std::vector<std::string> out;
  out.reserve(array->elements.size());
  for (const GgufValue& e : array->elements) out.push_back(std::get<std::string>(e.value));
  return out;
}

StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  ASSIGN_OR_RETURN(const GgufArray* array, AsArray(*v, path_, key));
  std::vector<double> out;
  out.reserve(array->elements.size());
  for (const GgufValue& e : array->elements) {
    ASSIGN_OR_RETURN(double x, AsFloat(e, path_, key));
    out.push_back(x);
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  ASSIGN_OR_RETURN(const GgufArray* array, AsArray(*v, path_, key));
  std::vector<int64_t> out;
  out.reserve(array->elements.size());
  for (const GgufValue& e : array->elements) {
    ASSIGN_OR_RETURN(int64_t x, AsInt(e, path_, key));
    out.push_back(x);
  }
  return out;
}

std::span<const uint8_t> GgufFile::TensorData(const GgufTensorInfo& info) const {
  // Infos come from tensors(), whose bounds Open() checked; anything else is a caller bug.
  RIPPLEKV_CHECK(info.offset <= data_section_.size() &&
                 info.size_bytes <= data_section_.size() - info.offset);
  return data_section_.subspan(info.offset, info.size_bytes);
}

StatusOr<kernels::Tensor> GgufFile::LoadTensor(const GgufTensorInfo& info) const {
  kernels::Shape shape(info.dims.rbegin(), info.dims.rend());
  kernels::Tensor tensor(std::move(shape));
  const Status status = kernels::Dequantize(info.type, TensorData(info), tensor.view());
  if (!status.ok()) {
    return Status(status.code(),
                  Cat(path_, ": tensor '", info.name, "': ", std::string(status.message())));
  }
  return tensor;
}

}  // namespace ripplekv::worker
