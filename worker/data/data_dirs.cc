#include "worker/data/data_dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/strings.h"

namespace ripplekv::worker {
namespace {

#ifdef O_PATH
constexpr int kDirOpenFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;
#else
constexpr int kDirOpenFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
#endif

// An owned file descriptor (-1: none).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

// realpath(3) of `path`, or the errno-mapped status of its failure.
StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return FileErrnoStatus(errno, path, "resolve");
  return std::string(buf);
}

// True when the resolved path `path` is `dir` or lies below it, compared component-wise.
bool Contains(const std::string& dir, const std::string& path) {
  if (dir == "/") return !path.empty() && path.front() == '/';
  if (!path.starts_with(dir)) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

}  // namespace

struct DataDirs::State {
  struct Dir {
    std::string path;  // resolved
    Fd fd;             // held from Open on
  };
  std::vector<Dir> dirs;
};

StatusOr<DataDirs> DataDirs::Open(const std::vector<std::string>& dirs) {
  DataDirs out;
  if (dirs.empty()) return out;
  auto state = std::make_shared<State>();
  for (const std::string& dir : dirs) {
    if (dir.empty()) return absl::InvalidArgumentError("data directory: empty name");
    StatusOr<std::string> resolved = RealPath(dir);
    if (!resolved.ok()) {
      return Status(resolved.status().code(),
                    Cat("data directory ", std::string(resolved.status().message())));
    }
    Fd fd(::open(resolved->c_str(), kDirOpenFlags));
    if (fd.get() < 0) {
      const int error = errno;
      if (error == ENOTDIR) {
        return absl::InvalidArgumentError(Cat("data directory ", dir, ": not a directory"));
      }
      const Status s = FileErrnoStatus(error, dir, "open");
      return Status(s.code(), Cat("data directory ", std::string(s.message())));
    }
    state->dirs.push_back({.path = *std::move(resolved), .fd = std::move(fd)});
  }
  out.state_ = std::move(state);
  return out;
}

std::vector<std::string> DataDirs::dirs() const {
  std::vector<std::string> out;
  if (state_ != nullptr) {
    for (const State::Dir& d : state_->dirs) out.push_back(d.path);
  }
  return out;
}

StatusOr<std::string> DataDirs::Resolve(const std::string& path) const {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError(
        Cat(path, ": no data directories configured (ripplekv-worker --data-dir)"));
  }
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(Cat(path, ": not an absolute path"));
  }
  ASSIGN_OR_RETURN(std::string resolved, RealPath(path));
  bool inside = false;
  for (const State::Dir& d : state_->dirs) inside = inside || Contains(d.path, resolved);
  if (!inside) {
    return absl::PermissionDeniedError(Cat(path, ": resolves to ", resolved,
                                           ", outside the data directories (",
                                           absl::StrJoin(dirs(), ", "), ")"));
  }
  struct stat st = {};
  if (::stat(resolved.c_str(), &st) != 0) return FileErrnoStatus(errno, resolved, "stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        Cat(path, ": resolves to ", resolved, ", not a regular file"));
  }
  return resolved;
}

StatusOr<std::string> DataDirs::ReadFile(const std::string& path, uint64_t max_bytes) const {
  ASSIGN_OR_RETURN(const std::string resolved, Resolve(path));
  // The directory holding `resolved` (the longest one, when directories nest) and the components
  // below it; Resolve guarantees there is one and that a file lies below it.
  const State::Dir* dir = nullptr;
  for (const State::Dir& d : state_->dirs) {
    if (Contains(d.path, resolved) && (dir == nullptr || d.path.size() > dir->path.size())) {
      dir = &d;
    }
  }
  if (dir == nullptr) return absl::InternalError(Cat(resolved, ": no data directory holds it"));
  const size_t skip = dir->path == "/" ? 1 : dir->path.size() + 1;
  const std::string_view below =
      skip < resolved.size() ? std::string_view(resolved).substr(skip) : std::string_view();
  const std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(below.data(), below.size()), '/', absl::SkipEmpty());
  if (parts.empty()) return absl::InvalidArgumentError(Cat(resolved, ": not a regular file"));

  Fd owned;  // the descriptor of the directory reached so far, when not the held one
  int at = dir->fd.get();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    Fd next(::openat(at, parts[i].c_str(), kDirOpenFlags | O_NOFOLLOW));
    if (next.get() < 0) return FileErrnoStatus(errno, resolved, "open");
    owned = std::move(next);
    at = owned.get();
  }
  // O_NONBLOCK: a FIFO swapped in must not block the open; it is refused by the type check.
  Fd file(::openat(at, parts.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) return FileErrnoStatus(errno, resolved, "open");
  struct stat st = {};
  if (::fstat(file.get(), &st) != 0) return FileErrnoStatus(errno, resolved, "stat");
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(Cat(resolved, ": not a regular file"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        Cat(resolved, ": ", size, " bytes, larger than the limit of ", max_bytes, " bytes"));
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(file.get(), bytes.data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileErrnoStatus(errno, resolved, "read");
    }
    if (n == 0) break;  // the file shrank: the bytes that were there
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace ripplekv::worker
