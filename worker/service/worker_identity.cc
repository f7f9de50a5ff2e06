#include "worker/service/worker_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace ripplekv::worker {
namespace {

std::string EnvOr(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// Creates `dir` and any missing parents with mode 0700 (existing ones are left as they are).
Status MakeDirs(const std::string& dir) {
  for (size_t end = 1; end <= dir.size(); ++end) {
    if (end != dir.size() && dir[end] != '/') continue;
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST) continue;
    return FileErrnoStatus(errno, prefix, "create directory");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return FileErrnoStatus(errno, dir, "stat");
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

StateDirEnvironment StateDirEnvironment::FromProcess() {
  return {.ripplekv_home = EnvOr("RIPPLEKV_HOME"),
          .xdg_state_home = EnvOr("XDG_STATE_HOME"),
          .home = EnvOr("HOME")};
}

std::string DefaultStateDir(const StateDirEnvironment& env) {
  if (!env.ripplekv_home.empty()) return JoinPath(env.ripplekv_home, "worker");
  if (env.xdg_state_home.starts_with('/')) return JoinPath(env.xdg_state_home, "ripplekv");
  if (!env.home.empty()) return JoinPath(env.home, ".local/state/ripplekv");
  return "";
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "worker";
  return buf;
}

std::string DeviceIdPart(std::string_view device) {
  std::string out(device);
  for (char& c : out) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!plain) c = '-';
  }
  return out;
}

WorkerIdentity WorkerIdentity::Explicit(std::string id) {
  WorkerIdentity out;
  out.id_ = std::move(id);
  out.source_ = "--id";
  return out;
}

WorkerIdentity WorkerIdentity::PerProcess(std::string_view host, std::string_view device, int pid) {
  WorkerIdentity out;
  out.id_ = absl::StrCat(std::string(host), "-", DeviceIdPart(device), "-pid", pid);
  out.source_ = "host, device and pid";
  return out;
}

StatusOr<WorkerIdentity> WorkerIdentity::Allocate(const IdentityOptions& options) {
  if (options.host.empty() || options.device.empty() || options.state_dir.empty()) {
    return absl::InvalidArgumentError(
        "worker identity: host, device and state directory are required");
  }
  RETURN_IF_ERROR(MakeDirs(options.state_dir));
  const std::string prefix = absl::StrCat(options.host, "-", DeviceIdPart(options.device), "-");
  for (int slot = 0; slot < options.max_slots; ++slot) {
    const std::string id = absl::StrCat(prefix, slot);
    const std::string path = JoinPath(options.state_dir, absl::StrCat("worker-", id, ".lock"));
    // O_NOFOLLOW: a symlink planted in the directory cannot redirect the lock (or its pid write).
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return FileErrnoStatus(errno, path, "open");
    int locked;
    do {
      locked = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (locked != 0 && errno == EINTR);
    if (locked != 0) {
      const int error = errno;
      ::close(fd);
      if (error == EWOULDBLOCK) continue;  // another worker's slot
      return FileErrnoStatus(error, path, "lock");
    }
    // For an operator wondering whose slot it is; the lock, not the contents, is what counts.
    const std::string pid = absl::StrCat(::getpid(), "\n");
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    WorkerIdentity out;
    out.id_ = id;
    out.source_ = absl::StrCat("slot ", slot, ", lock ", path);
    out.lock_path_ = path;
    out.slot_ = slot;
    out.fd_ = fd;
    return out;
  }
  return absl::ResourceExhaustedError(absl::StrCat("all ", options.max_slots, " slots ", prefix,
                                                   "N in ", options.state_dir,
                                                   " are held by running workers"));
}

WorkerIdentity::WorkerIdentity(WorkerIdentity&& other) noexcept
    : id_(std::move(other.id_)),
      source_(std::move(other.source_)),
      lock_path_(std::move(other.lock_path_)),
      slot_(std::exchange(other.slot_, -1)),
      fd_(std::exchange(other.fd_, -1)) {}

WorkerIdentity& WorkerIdentity::operator=(WorkerIdentity&& other) noexcept {
  if (this != &other) {
    Release();
    id_ = std::move(other.id_);
    source_ = std::move(other.source_);
    lock_path_ = std::move(other.lock_path_);
    slot_ = std::exchange(other.slot_, -1);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

WorkerIdentity::~WorkerIdentity() { Release(); }

void WorkerIdentity::Release() noexcept {
  if (fd_ >= 0) ::close(fd_);  // drops the flock
  fd_ = -1;
}

ChosenIdentity ChooseWorkerIdentity(const std::string& explicit_id,
                                    const IdentityOptions& options) {
  if (!explicit_id.empty()) return {WorkerIdentity::Explicit(explicit_id), ""};
  StatusOr<WorkerIdentity> allocated =
      options.state_dir.empty()
          ? StatusOr<WorkerIdentity>(absl::FailedPreconditionError(
                "no state directory (no --state-dir, and none of RIPPLEKV_HOME, XDG_STATE_HOME, "
                "HOME is set)"))
          : WorkerIdentity::Allocate(options);
  if (allocated.ok()) return {std::move(*allocated), ""};
  return {WorkerIdentity::PerProcess(options.host, options.device, static_cast<int>(::getpid())),
          std::string(allocated.status().message())};
}

}  // namespace ripplekv::worker
