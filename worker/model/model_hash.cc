#include "worker/model/model_hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "worker/model/safetensors_reader.h"

namespace ripplekv::worker {
namespace {

struct EvpCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpCtx = std::unique_ptr<EVP_MD_CTX, EvpCtxDeleter>;

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// Incremental SHA-256. OpenSSL failures here mean a broken library build, not bad input, but they
// still surface as Internal rather than a crash.
class Sha256 {
 public:
  Status Init() {
    ctx_.reset(EVP_MD_CTX_new());
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
      return absl::InternalError("OpenSSL: cannot initialise SHA-256");
    }
    return absl::OkStatus();
  }
  Status Update(const void* data, size_t n) {
    if (EVP_DigestUpdate(ctx_.get(), data, n) != 1) {
      return absl::InternalError("OpenSSL: SHA-256 update failed");
    }
    return absl::OkStatus();
  }
  StatusOr<std::string> FinalHex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest, &len) != 1) {
      return absl::InternalError("OpenSSL: SHA-256 final failed");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * static_cast<size_t>(len));
    for (unsigned int i = 0; i < len; ++i) {
      hex.push_back(kHex[digest[i] >> 4]);
      hex.push_back(kHex[digest[i] & 0xf]);
    }
    return hex;
  }

 private:
  EvpCtx ctx_;
};

StatusOr<std::string> Sha256OfBytes(std::string_view bytes) {
  Sha256 sha;
  RETURN_IF_ERROR(sha.Init());
  RETURN_IF_ERROR(sha.Update(bytes.data(), bytes.size()));
  return sha.FinalHex();
}

struct HashedFile {
  uint64_t size_bytes = 0;
  std::string sha256;
};

StatusOr<HashedFile> HashFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileErrnoStatus(errno, path, "open");
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return FileErrnoStatus(errno, path, "stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint; failure changes nothing

  Sha256 sha;
  RETURN_IF_ERROR(sha.Init());
  std::vector<unsigned char> buffer(kHashChunkBytes);
  HashedFile out;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileErrnoStatus(errno, path, absl::StrCat("read at byte offset ", out.size_bytes));
    }
    if (n == 0) break;
    RETURN_IF_ERROR(sha.Update(buffer.data(), static_cast<size_t>(n)));
    out.size_bytes += static_cast<uint64_t>(n);
  }
  ASSIGN_OR_RETURN(out.sha256, sha.FinalHex());
  return out;
}

StatusOr<bool> IsDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FileErrnoStatus(errno, path, "stat");
  return S_ISDIR(st.st_mode);
}

// The model hash from the weight files' digests (`weights` sorted by name).
StatusOr<std::string> CombineWeightDigests(const std::vector<const FileDigest*>& weights,
                                           bool sharded) {
  if (!sharded) return weights.front()->sha256;
  std::string manifest;
  for (const FileDigest* f : weights) absl::StrAppend(&manifest, f->sha256, "  ", f->name, "\n");
  return Sha256OfBytes(manifest);
}

}  // namespace

StatusOr<std::string> Sha256Hex(std::string_view bytes) { return Sha256OfBytes(bytes); }

StatusOr<std::string> Sha256FileHex(const std::string& path) {
  ASSIGN_OR_RETURN(HashedFile f, HashFile(path));
  return std::move(f.sha256);
}

StatusOr<std::string> ModelHash(const std::string& path) {
  ASSIGN_OR_RETURN(bool is_dir, IsDirectory(path));
  if (!is_dir) return Sha256FileHex(path);
  ASSIGN_OR_RETURN(SafetensorsWeightFiles weights, ListSafetensorsWeightFiles(path));
  std::vector<FileDigest> digests;
  digests.reserve(weights.names.size());
  for (const std::string& name : weights.names) {
    ASSIGN_OR_RETURN(HashedFile f, HashFile(JoinPath(path, name)));
    digests.push_back({name, f.size_bytes, std::move(f.sha256), true});
  }
  std::vector<const FileDigest*> ptrs;
  ptrs.reserve(digests.size());
  for (const FileDigest& d : digests) ptrs.push_back(&d);
  return CombineWeightDigests(ptrs, weights.sharded);
}

StatusOr<ModelDigest> ModelFilesDigest(const std::string& path) {
  ASSIGN_OR_RETURN(bool is_dir, IsDirectory(path));
  ModelDigest out;
  if (!is_dir) {
    ASSIGN_OR_RETURN(HashedFile f, HashFile(path));
    std::string name = std::filesystem::path(path).filename().string();
    out.model_hash = f.sha256;
    out.files.push_back({std::move(name), f.size_bytes, std::move(f.sha256), true});
    return out;
  }

  ASSIGN_OR_RETURN(SafetensorsWeightFiles weights, ListSafetensorsWeightFiles(path));
  std::set<std::string> names(weights.names.begin(), weights.names.end());
  std::error_code ec;
  std::filesystem::directory_iterator it(path, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code status_ec;
    // status() follows symlinks, so the Hugging Face cache layout (links into blobs/) works.
    if (name.empty() || name[0] == '.' || !it->is_regular_file(status_ec)) continue;
    names.insert(std::move(name));
  }
  if (ec) {
    return FileErrnoStatus(ec.value(), path, "list the directory");
  }

  const std::set<std::string> weight_set(weights.names.begin(), weights.names.end());
  for (const std::string& name : names) {  // std::set<std::string> iterates byte-wise sorted
    ASSIGN_OR_RETURN(HashedFile f, HashFile(JoinPath(path, name)));
    out.files.push_back({name, f.size_bytes, std::move(f.sha256), weight_set.count(name) > 0});
  }
  std::vector<const FileDigest*> weight_digests;
  for (const FileDigest& d : out.files) {
    if (d.in_model_hash) weight_digests.push_back(&d);
  }
  ASSIGN_OR_RETURN(out.model_hash, CombineWeightDigests(weight_digests, weights.sharded));
  return out;
}

}  // namespace ripplekv::worker
