// Store::Checkpoint: a consistent copy of the database through RocksDB's checkpoint
// (docs/STORE.md, "Backup and restore").

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "base/strings.h"
#include "rocksdb/utilities/checkpoint.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

// Total size of the regular files under `dir`, bytes.
StatusOr<uint64_t> DirectoryBytes(const std::filesystem::path& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const uintmax_t size = it->file_size(ec);
    if (ec) break;
    bytes += size;
  }
  if (ec) return absl::InternalError(Cat("checkpoint ", dir.string(), ": ", ec.message()));
  return bytes;
}

// Makes the checkpoint private to its owner: `dir` and the directories under it 0700, its files
// 0600. Table files in a checkpoint are hard links of the live database's files (one inode), so
// this also narrows those; the scheduler creates its files 0600 in the first place (its umask).
Status RestrictModes(const std::filesystem::path& dir) {
  const auto restrict = [](const std::filesystem::path& path, mode_t mode) -> Status {
    if (::chmod(path.c_str(), mode) != 0) {
      return absl::InternalError(
          Cat("checkpoint: chmod ", path.string(), ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(restrict(dir, 0700));
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::filesystem::file_type type = it->symlink_status(ec).type();
    if (ec) break;
    if (type == std::filesystem::file_type::directory) {
      RETURN_IF_ERROR(restrict(it->path(), 0700));
    } else if (type == std::filesystem::file_type::regular) {
      RETURN_IF_ERROR(restrict(it->path(), 0600));
    }
  }
  if (ec) return absl::InternalError(Cat("checkpoint ", dir.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

StatusOr<CheckpointInfo> RocksStore::Checkpoint(const std::string& dir) {
  const std::string context = Cat("checkpoint ", dir);
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint: the directory is empty");
  // A checkpoint flushes the memtables first: a write, refused after a failed one.
  RETURN_IF_ERROR(CheckWritable());
  const std::filesystem::path path(dir);
  if (!path.is_absolute()) {
    return absl::InvalidArgumentError(Cat(context, ": not an absolute path"));
  }
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found) {
    if (ec) return absl::InternalError(Cat(context, ": ", ec.message()));
    return absl::AlreadyExistsError(Cat(context, ": exists; a checkpoint makes a new directory"));
  }
  const std::filesystem::path parent = path.lexically_normal().parent_path();
  if (!std::filesystem::is_directory(parent, ec)) {
    return absl::InvalidArgumentError(
        Cat(context, ": its parent ", parent.string(), " is not an existing directory"));
  }
  // Read before the checkpoint; Initialize() wrote it and nothing changes it while open.
  ASSIGN_OR_RETURN(std::optional<std::string> schema, Get(kMeta, kSchemaVersionKey));

  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), context));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: flush the memtables first, so the copy holds table files (hard links)
  // and only a short log to replay.
  const rocksdb::Status s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) {
    // RocksDB builds the copy in "<dir>.tmp" and renames it to `dir` last: a failure leaves at
    // most the temporary directory.
    std::filesystem::remove_all(Cat(dir, ".tmp"), ec);
    return FromRocks(s, context);
  }
  RETURN_IF_ERROR(RestrictModes(path));
  CheckpointInfo info;
  info.dir = dir;
  info.created_at_ms = Now();
  info.schema_version = schema.value_or(std::string(kSchemaVersion));
  ASSIGN_OR_RETURN(info.bytes, DirectoryBytes(path));
  return info;
}

}  // namespace ripplekv::store
