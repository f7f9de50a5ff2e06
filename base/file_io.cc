#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/strings.h"

namespace ripplekv {
namespace {

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Takes ownership of `fd`, closing the one held before.
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and reports the result (close can report a deferred write error).
  int Close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Opens `path` read-only and checks that it is a regular file; `*size` gets its size in bytes.
Status OpenRegular(const std::string& path, Fd* fd, uint64_t* size) {
  fd->Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd->get() < 0) return FileErrnoStatus(errno, path, "open");
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return FileErrnoStatus(errno, path, "stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

// Reads up to `want` bytes from `fd`; fewer only at the end of the file.
StatusOr<std::string> ReadUpTo(const Fd& fd, const std::string& path, uint64_t want) {
  std::string out(want, '\0');
  uint64_t done = 0;
  while (done < want) {
    ssize_t n = ::read(fd.get(), out.data() + done, want - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileErrnoStatus(errno, path, "read");
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(Sv(dir), Sv(name));
  return absl::StrCat(Sv(dir), "/", Sv(name));
}

Status FileErrnoStatus(int error_number, std::string_view path, std::string_view action) {
  const std::string message =
      absl::StrCat(Sv(path), ": cannot ", Sv(action), ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:  // a path component is a file: the path names nothing
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case EINVAL:
      return absl::InvalidArgumentError(message);
    case EFBIG:
    case EOVERFLOW:  // the size does not fit: "too large"
    case ENOMEM:
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(message);
    case EIO:
    case EAGAIN:
    case EINTR:
    case EBUSY:
    case ETIMEDOUT:
    case ESTALE:
      return absl::UnavailableError(message);
    default:
      return absl::ErrnoToStatus(error_number, absl::StrCat(Sv(path), ": cannot ", Sv(action)));
  }
}

StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes) {
  Fd fd(-1);
  uint64_t size = 0;
  RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", size, " bytes, larger than the limit of ", max_bytes, " bytes"));
  }
  return ReadUpTo(fd, path, size);
}

StatusOr<std::string> ReadFilePrefix(const std::string& path, uint64_t max_bytes) {
  Fd fd(-1);
  uint64_t size = 0;
  RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
  return ReadUpTo(fd, path, size < max_bytes ? size : max_bytes);
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return FileErrnoStatus(errno, tmp, "create");
  auto fail = [&tmp](Status status) {
    ::unlink(tmp.c_str());
    return status;
  };
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(FileErrnoStatus(errno, tmp, "write"));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail(FileErrnoStatus(errno, tmp, "fsync"));
  if (fd.Close() != 0) return fail(FileErrnoStatus(errno, tmp, "close"));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(FileErrnoStatus(errno, path, absl::StrCat("rename ", tmp, " to it")));
  }
  // Make the rename itself durable. A directory that cannot be opened or synced (some file
  // systems refuse) does not undo a write that has already replaced the file.
  Fd dir(::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
  return absl::OkStatus();
}

}  // namespace ripplekv
