#include "proto/secret_file_mode.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/strings.h"

namespace ripplekv::v1 {

StatusOr<std::string> SecretFileModeProblem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    const std::string message = Cat(path, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  const mode_t mode = st.st_mode & 07777;
  std::string what;
  if ((mode & (S_IROTH | S_IWOTH)) != 0) {
    what = "lets every user of the machine read or write it";
  } else if ((mode & S_IWGRP) != 0) {
    what = "lets its group write it";
  } else if ((mode & S_IRGRP) != 0 && st.st_uid != 0) {
    what = "lets its group read it (allowed only for a file root owns)";
  } else {
    return std::string();
  }
  char octal[8];
  std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
  return Cat(path, ": mode ", octal, " ", what, "; run `chmod 600 ", path, "`");
}

}  // namespace ripplekv::v1
