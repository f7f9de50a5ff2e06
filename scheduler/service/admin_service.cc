#include "scheduler/service/admin_service.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "base/strings.h"
#include "scheduler/service/convert.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr size_t kMaxDirBytes = 4096;

// realpath(3): absolute, without "." / ".." / symlinks; the path must exist.
StatusOr<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&::free)> resolved(::realpath(path.c_str(), nullptr), &::free);
  if (resolved == nullptr) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(Cat(path, ": ", std::strerror(error)));
    }
    return absl::InternalError(Cat(path, ": ", std::strerror(error)));
  }
  return std::string(resolved.get());
}

// True when `path` is `root` or lies below it (both realpath results).
bool IsUnder(const std::string& path, const std::string& root) {
  if (path == root) return true;
  if (root == "/") return true;
  return path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/';
}

std::string RootList(const std::vector<std::string>& roots) {
  std::string list;
  for (const std::string& root : roots) list += (list.empty() ? "" : ", ") + root;
  return list;
}

}  // namespace

StatusOr<std::vector<std::string>> PrepareCheckpointRoots(const std::vector<std::string>& dirs) {
  std::vector<std::string> roots;
  for (const std::string& dir : dirs) {
    const std::string context = Cat("--checkpoint-dir ", dir);
    if (dir.empty()) return absl::InvalidArgumentError("--checkpoint-dir: the path is empty");
    if (!std::filesystem::path(dir).is_absolute()) {
      return absl::InvalidArgumentError(Cat(context, ": not an absolute path"));
    }
    std::error_code ec;
    const bool created = std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(Cat(context, ": cannot create it: ", ec.message()));
    if (created) {
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, ec);
      if (ec) return absl::InternalError(Cat(context, ": chmod 700: ", ec.message()));
    }
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(Cat(context, ": not a directory"));
    }
    StatusOr<std::string> real = RealPath(dir);
    if (!real.ok()) {
      return absl::InternalError(Cat(context, ": ", std::string(real.status().message())));
    }
    roots.push_back(*std::move(real));
  }
  return roots;
}

StatusOr<std::string> ResolveCheckpointDir(const std::vector<std::string>& roots,
                                           const std::string& requested) {
  if (roots.empty()) {
    return absl::FailedPreconditionError(
        "checkpoint: this scheduler allows no online checkpoints; start it with "
        "--checkpoint-dir DIR and checkpoint to a new directory under DIR");
  }
  const std::string context = Cat("checkpoint ", requested);
  if (requested.empty()) return absl::InvalidArgumentError("checkpoint: the directory is empty");
  std::string trimmed = requested;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  std::filesystem::path path(trimmed);
  if (!path.is_absolute()) path = std::filesystem::path(roots.front()) / path;
  const std::filesystem::path name = path.filename();
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(Cat(context, ": does not name a new directory"));
  }
  // The parent resolved: ".." and symlinks anywhere above the new directory are followed here,
  // so what is checked against the roots is where the checkpoint really lands.
  StatusOr<std::string> parent = RealPath(path.parent_path().string());
  if (!parent.ok()) {
    return absl::InvalidArgumentError(Cat(context, ": its parent ", path.parent_path().string(),
                                          " is not an existing directory"));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(*parent, ec)) {
    return absl::InvalidArgumentError(
        Cat(context, ": its parent ", *parent, " is not an existing directory"));
  }
  const std::string target = (std::filesystem::path(*parent) / name).string();
  bool allowed = false;
  for (const std::string& root : roots) allowed = allowed || IsUnder(*parent, root);
  if (!allowed) {
    return absl::InvalidArgumentError(
        Cat(context, ": resolves to ", target, ", outside the checkpoint directories (",
            RootList(roots), "; --checkpoint-dir)"));
  }
  // The target itself: RocksDB makes it and refuses an existing one; a symlink there is refused
  // here, before RocksDB could follow it.
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(
        Cat(context, ": ", target, " exists; a checkpoint makes a new directory"));
  }
  return target;
}

Status AdminServiceImpl::DoCreateCheckpoint(const v1::CreateCheckpointRequest& request,
                                            v1::CreateCheckpointResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "CreateCheckpoint"));
  if (request.dir().size() > kMaxDirBytes) {
    return absl::InvalidArgumentError(
        Cat("dir: ", request.dir().size(), " bytes, at most ", kMaxDirBytes));
  }
  ASSIGN_OR_RETURN(const std::string dir,
                   ResolveCheckpointDir(options_.checkpoint_roots, request.dir()));
  ASSIGN_OR_RETURN(store::CheckpointInfo info, options_.store->Checkpoint(dir));
  spdlog::info("checkpoint of the database written to {} ({} bytes)", info.dir, info.bytes);
  response->set_dir(info.dir);
  response->set_bytes(info.bytes);
  response->set_created_unix_ms(info.created_at_ms);
  response->set_schema_version(info.schema_version);
  return absl::OkStatus();
}

Status AdminServiceImpl::DoLiftQuarantine(const v1::LiftQuarantineRequest& request,
                                          v1::LiftQuarantineResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "LiftQuarantine"));
  if (request.worker_id().empty()) return absl::InvalidArgumentError("worker_id: is required");
  ASSIGN_OR_RETURN(std::string reason, options_.scheduler->LiftQuarantine(request.worker_id()));
  spdlog::warn("worker {}: quarantine lifted by an admin (it was: {})",
               EscapeForLog(request.worker_id()), reason);
  response->set_reason(std::move(reason));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* AdminServiceImpl::LiftQuarantine(
    grpc::CallbackServerContext* context, const v1::LiftQuarantineRequest* request,
    v1::LiftQuarantineResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoLiftQuarantine(*request, response); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateCheckpoint(
    grpc::CallbackServerContext* context, const v1::CreateCheckpointRequest* request,
    v1::CreateCheckpointResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoCreateCheckpoint(*request, response); });
}

}  // namespace ripplekv::scheduler::service
