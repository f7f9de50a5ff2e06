#pragma once
// A scratch file for fuzz targets whose parser takes a path: created in $TMPDIR (or /tmp) and
// unlinked at once, then reached through /proc/self/fd/N, so nothing is left behind however the
// fuzzer exits (libFuzzer ends with _Exit, which skips atexit handlers and destructors). Linux
// only.

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace ripplekv::fuzz {

class ScratchFile {
 public:
  // Aborts when no file can be created: a fuzz target cannot run without it.
  ScratchFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/ripplekv_fuzz_XXXXXX";
    fd_ = ::mkstemp(pattern.data());
    if (fd_ < 0) std::abort();
    ::unlink(pattern.c_str());
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() { ::close(fd_); }

  // Replaces the contents with `bytes`; aborts on a write error.
  void Write(std::string_view bytes) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }

  // A path that opens this file while the object lives.
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace ripplekv::fuzz
