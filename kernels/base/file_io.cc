#include "kernels/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ripplekv {
namespace {

Status ErrnoStatus(int error_number, const std::string& what, const std::string& path) {
  return absl::ErrnoToStatus(error_number, absl::StrCat(what, " ", path));
}

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

}  // namespace

StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", size, " bytes, larger than the limit of ", max_bytes));
  }
  std::string out(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd.get(), out.data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path);
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot create", tmp);
  auto fail = [&tmp](Status status) {
    ::unlink(tmp.c_str());
    return status;
  };
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(ErrnoStatus(errno, "cannot write", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail(ErrnoStatus(errno, "cannot fsync", tmp));
  if (fd.Close() != 0) return fail(ErrnoStatus(errno, "cannot close", tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("cannot rename ", tmp, " to"), path));
  }
  // Make the rename itself durable. A directory that cannot be opened or synced (some file
  // systems refuse) does not undo a write that has already replaced the file.
  Fd dir(::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
  return absl::OkStatus();
}

}  // namespace ripplekv
