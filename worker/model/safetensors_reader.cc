#include "worker/model/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "kernels/dequant/dequant.h"
#include "nlohmann/json.hpp"

namespace ripplekv::worker {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

namespace {

using Json = nlohmann::json;

constexpr uint64_t kLengthPrefixBytes = 8;

struct DtypeEntry {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},      {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},          {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1}, {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},        {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},      {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},        {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},        {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
};

const DtypeEntry* FindDtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// A JSON value as a non-negative integer, or false.
bool AsUint64(const Json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// Parses JSON text, turning nlohmann's exceptions into a Status that names `display_name` and the
// byte offset in the file (`base_offset` is where the text starts). Duplicate keys of the top-level
// object are an error (nlohmann would silently keep the last one).
StatusOr<Json> ParseJsonObject(std::string_view text, const std::string& display_name,
                               uint64_t base_offset, std::string_view what) {
  std::string duplicate;
  bool has_duplicate = false;
  std::set<std::string, std::less<>> top_keys;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string() && !has_duplicate) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!top_keys.insert(key).second) {
        has_duplicate = true;
        duplicate = key;
      }
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const Json::parse_error& e) {
    uint64_t at = base_offset + (e.byte > 0 ? e.byte - 1 : 0);
    return absl::InvalidArgumentError(absl::StrCat(
        display_name, ": ", Sv(what), " is not valid JSON at byte offset ", at, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": ", Sv(what), " could not be parsed as JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(display_name, ": ", Sv(what), " at byte offset ",
                                                   base_offset, " is not a JSON object"));
  }
  if (has_duplicate) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": ", Sv(what), " names '", duplicate, "' twice"));
  }
  return j;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A shard name from the index must be a plain file name inside the directory: no separators,
// no "." / "..", nothing the model hash's "<hash>  <name>" lines could not represent.
bool IsPlainFileName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '\\' || c == '\n' || c == '\r' || c == '\0') return false;
  }
  return true;
}

struct IndexContents {
  std::map<std::string, std::string, std::less<>> weight_map;  // tensor -> shard file name
  std::vector<std::string> shards;                             // sorted, unique
};

// A regular file opened read-only; closed when this goes out of scope.
struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;  // bytes, at open time
  OpenedFile() = default;
  OpenedFile(OpenedFile&& other) noexcept : fd(std::exchange(other.fd, -1)), size(other.size) {}
  OpenedFile& operator=(OpenedFile&&) = delete;
  ~OpenedFile() {
    if (fd >= 0) ::close(fd);
  }
};

// Errors name the path and the failing call; a directory or device is InvalidArgument.
StatusOr<OpenedFile> OpenRegularFile(const std::string& path) {
  OpenedFile file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return FileErrnoStatus(errno, path, "open");
  struct stat st;
  if (::fstat(file.fd, &st) != 0) return FileErrnoStatus(errno, path, "stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  file.size = static_cast<uint64_t>(st.st_size);
  return file;
}

StatusOr<IndexContents> ReadIndex(const std::string& dir) {
  const std::string path = JoinPath(dir, SafetensorsModelFiles::kIndexFileName);
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, SafetensorsFile::kMaxHeaderBytes));
  ASSIGN_OR_RETURN(Json j, ParseJsonObject(text, path, 0, "the index"));
  auto it = j.find("weight_map");
  if (it == j.end() || !it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field 'weight_map' is missing or not an object"));
  }
  IndexContents index;
  std::set<std::string> shards;
  for (auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map entry for tensor '", tensor, "' is not a string"));
    }
    const auto& name = shard.get_ref<const std::string&>();
    if (!IsPlainFileName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map entry for tensor '",
                                                     tensor, "' names '", name,
                                                     "', which is not a plain file name"));
    }
    index.weight_map.emplace(tensor, name);
    shards.insert(name);
  }
  if (shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map is empty"));
  }
  index.shards.assign(shards.begin(), shards.end());  // std::string's < is byte-wise
  for (const std::string& shard : index.shards) {
    if (!IsRegularFile(JoinPath(dir, shard))) {
      return absl::NotFoundError(
          absl::StrCat(path, " names shard '", shard, "', which is missing from ", dir));
    }
  }
  return index;
}

Status InvalidTensor(const std::string& path, std::string_view tensor, std::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": tensor '", Sv(tensor), "': ", Sv(detail)));
}

}  // namespace

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

SafetensorsFile::~SafetensorsFile() = default;

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(OpenedFile opened, OpenRegularFile(path));
  auto mapping = std::make_unique<Mapping>();
  mapping->size = static_cast<size_t>(opened.size);
  if (mapping->size > 0) {
    void* addr = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, opened.fd, 0);
    if (addr == MAP_FAILED) return FileErrnoStatus(errno, path, "mmap");
    mapping->addr = addr;
  }
  // Closing the descriptor (when `opened` goes out of scope) leaves the mapping valid.

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->bytes_ = {static_cast<const uint8_t*>(mapping->addr), mapping->size};
  file->mapping_ = std::move(mapping);
  RETURN_IF_ERROR(file->Parse());
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(
    std::span<const uint8_t> bytes, std::string display_name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(display_name);
  file->bytes_ = bytes;
  RETURN_IF_ERROR(file->Parse());
  return file;
}

Status SafetensorsFile::Parse() {
  const uint64_t file_size = bytes_.size();
  if (file_size < kLengthPrefixBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": ", file_size, " bytes is too small for the 8-byte header length at offset 0"));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes_.data(), sizeof(header_len));
  if (header_len > file_size - kLengthPrefixBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": header length ", header_len, " at byte offset 0 exceeds the ",
                     file_size - kLengthPrefixBytes, " bytes that follow it"));
  }
  if (header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": header length ", header_len,
                                                   " at byte offset 0 exceeds the limit of ",
                                                   kMaxHeaderBytes, " bytes"));
  }
  std::string_view text(reinterpret_cast<const char*>(bytes_.data()) + kLengthPrefixBytes,
                        static_cast<size_t>(header_len));
  ASSIGN_OR_RETURN(Json header, ParseJsonObject(text, path_, kLengthPrefixBytes, "the header"));
  data_section_ = bytes_.subspan(kLengthPrefixBytes + header_len);
  const uint64_t data_size = data_section_.size();

  tensors_.clear();
  tensors_.reserve(header.size());
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object()) return InvalidTensor(path_, name, "entry is not a JSON object");
    SafetensorsTensorInfo info;
    info.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return InvalidTensor(path_, name, "field 'dtype' is missing or not a string");
    }
    const auto& dtype_name = dtype_it->get_ref<const std::string&>();
    const DtypeEntry* dtype = FindDtype(dtype_name);
    if (dtype == nullptr) {
      return absl::UnimplementedError(absl::StrCat(path_, ": tensor '", name, "' has dtype '",
                                                   dtype_name,
                                                   "', which is not a safetensors dtype we know"));
    }
    info.dtype = dtype->dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) {
      return InvalidTensor(path_, name, "field 'shape' is missing or not an array");
    }
    uint64_t numel = 1;
    bool overflow = false;
    for (const Json& d : *shape_it) {
      uint64_t dim = 0;
      if (!AsUint64(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidTensor(
            path_, name,
            absl::StrCat("field 'shape' holds ", d.dump(), ", not a non-negative integer"));
      }
      overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t expected_bytes = 0;
    if (overflow || __builtin_mul_overflow(numel, dtype->size, &expected_bytes)) {
      return InvalidTensor(path_, name,
                           absl::StrCat("shape ", kernels::ShapeString(info.shape), " of ",
                                        dtype_name, " overflows 64 bits"));
    }

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !AsUint64((*offsets_it)[0], &info.begin) || !AsUint64((*offsets_it)[1], &info.end)) {
      return InvalidTensor(path_, name,
                           "field 'data_offsets' is not an array of two non-negative integers");
    }
    if (info.end < info.begin) {
      return InvalidTensor(
          path_, name,
          absl::StrCat("data_offsets [", info.begin, ", ", info.end, ") ends before it begins"));
    }
    if (info.end > data_size) {
      return InvalidTensor(
          path_, name,
          absl::StrCat("data_offsets [", info.begin, ", ", info.end,
                       ") run past the data section, which holds ", data_size,
                       " bytes from byte offset ", kLengthPrefixBytes + header_len));
    }
    if (info.end - info.begin != expected_bytes) {
      return InvalidTensor(
          path_, name,
          absl::StrCat("data_offsets [", info.begin, ", ", info.end, ") hold ",
                       info.end - info.begin, " bytes but shape ", kernels::ShapeString(info.shape),
                       " of ", dtype_name, " needs ", expected_bytes));
    }
    tensors_.push_back(std::move(info));
  }

  // Overlap check over the non-empty ranges in offset order.
  std::vector<const SafetensorsTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (cur->begin < prev->end) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": tensors '", prev->name, "' [", prev->begin, ", ", prev->end, ") and '",
          cur->name, "' [", cur->begin, ", ", cur->end, ") overlap in the data section"));
    }
  }

  // nlohmann's object is a std::map, so items() came sorted already; sort anyway to keep the
  // contract independent of that.
  std::sort(tensors_.begin(), tensors_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return absl::OkStatus();
}

const SafetensorsTensorInfo* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const auto& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

std::span<const uint8_t> SafetensorsFile::TensorData(const SafetensorsTensorInfo& info) const {
  return data_section_.subspan(info.begin, info.end - info.begin);
}

StatusOr<kernels::Tensor> SafetensorsFile::LoadTensor(std::string_view name) const {
  const SafetensorsTensorInfo* info = FindTensor(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor named '", Sv(name), "'"));
  }
  return LoadTensor(*info);
}

StatusOr<kernels::Tensor> SafetensorsFile::LoadTensor(const SafetensorsTensorInfo& info) const {
  if (info.dtype != SafetensorsDtype::kF32 && info.dtype != SafetensorsDtype::kF16 &&
      info.dtype != SafetensorsDtype::kBF16) {
    return absl::UnimplementedError(absl::StrCat(path_, ": tensor '", info.name, "' has dtype ",
                                                 Sv(SafetensorsDtypeName(info.dtype)),
                                                 "; only F32, F16 and BF16 are loaded"));
  }
  std::span<const uint8_t> src = TensorData(info);
  kernels::Tensor out(info.shape);
  const int64_t n = out.numel();
  float* dst = out.data();
  if (info.dtype == SafetensorsDtype::kF32) {
    if (n > 0) std::memcpy(dst, src.data(), static_cast<size_t>(n) * sizeof(float));
    return out;
  }
  // F16/BF16 decode in kernels/dequant (any source alignment; rows split across threads). A
  // scalar (rank 0) is decoded as one row of one value.
  const kernels::GgmlType type = *GgmlTypeOf(info.dtype);
  kernels::TensorView view = out.view();
  if (view.rank() == 0) view.shape = {n};
  Status decoded = kernels::Dequantize(type, src, view);
  if (!decoded.ok()) {
    return Status(decoded.code(),
                  absl::StrCat(path_, ": tensor '", info.name, "': ", decoded.message()));
  }
  return out;
}

std::optional<kernels::GgmlType> GgmlTypeOf(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32:
      return kernels::GgmlType::kF32;
    case SafetensorsDtype::kF16:
      return kernels::GgmlType::kF16;
    case SafetensorsDtype::kBF16:
      return kernels::GgmlType::kBF16;
    default:
      return std::nullopt;
  }
}

// ---------------------------------------------------------------------------------------------
// SafetensorsModelFiles

namespace {

// The one place that decides which files a model directory's weights live in; `index` receives
// the weight map when the index is used.
StatusOr<SafetensorsWeightFiles> ResolveWeightFiles(const std::string& dir, IndexContents* index) {
  if (IsRegularFile(JoinPath(dir, SafetensorsModelFiles::kSingleFileName))) {
    return SafetensorsWeightFiles{{SafetensorsModelFiles::kSingleFileName}, false};
  }
  if (!Exists(JoinPath(dir, SafetensorsModelFiles::kIndexFileName))) {
    return absl::NotFoundError(absl::StrCat(dir, ": neither ",
                                            SafetensorsModelFiles::kSingleFileName, " nor ",
                                            SafetensorsModelFiles::kIndexFileName, " found"));
  }
  ASSIGN_OR_RETURN(*index, ReadIndex(dir));
  return SafetensorsWeightFiles{index->shards, true};
}

}  // namespace

StatusOr<SafetensorsWeightFiles> ListSafetensorsWeightFiles(const std::string& dir) {
  IndexContents index;
  return ResolveWeightFiles(dir, &index);
}

StatusOr<std::unique_ptr<SafetensorsModelFiles>> SafetensorsModelFiles::Open(
    const std::string& dir) {
  std::unique_ptr<SafetensorsModelFiles> model(new SafetensorsModelFiles());
  model->dir_ = dir;
  IndexContents index;
  ASSIGN_OR_RETURN(SafetensorsWeightFiles weight_files, ResolveWeightFiles(dir, &index));
  model->sharded_ = weight_files.sharded;
  model->file_names_ = std::move(weight_files.names);

  for (const std::string& name : model->file_names_) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(JoinPath(dir, name)));
    for (const SafetensorsTensorInfo& info : file->tensors()) {
      auto [it, inserted] = model->by_name_.emplace(info.name, Location{file.get(), &info});
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, ": tensor '", info.name, "' appears in both ",
                         it->second.file->path(), " and ", file->path()));
      }
    }
    model->files_.push_back(std::move(file));
  }

  // The index must agree with the shards wherever it speaks. Tensors a shard holds that the
  // index omits are still served (they are unambiguous, having passed the duplicate check).
  const std::string index_path = JoinPath(dir, kIndexFileName);
  for (const auto& [tensor, shard] : index.weight_map) {
    auto it = model->by_name_.find(tensor);
    if (it == model->by_name_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, " puts tensor '", tensor,
                                                     "' in shard '", shard,
                                                     "', which does not hold it"));
    }
    const std::string expected = JoinPath(dir, shard);
    if (it->second.file->path() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, " puts tensor '", tensor,
                                                     "' in shard '", shard, "', but it is in ",
                                                     it->second.file->path()));
    }
  }
  return model;
}

std::vector<std::string> SafetensorsModelFiles::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, loc] : by_name_) names.push_back(name);
  return names;
}

const SafetensorsTensorInfo* SafetensorsModelFiles::FindTensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.info;
}

StatusOr<kernels::Tensor> SafetensorsModelFiles::LoadTensor(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor named '", Sv(name), "' in ",
                                            sharded_ ? "any shard" : kSingleFileName));
  }
  return it->second.file->LoadTensor(*it->second.info);
}

StatusOr<std::span<const uint8_t>> SafetensorsModelFiles::TensorData(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor named '", Sv(name), "' in ",
                                            sharded_ ? "any shard" : kSingleFileName));
  }
  return it->second.file->TensorData(*it->second.info);
}

}  // namespace ripplekv::worker
