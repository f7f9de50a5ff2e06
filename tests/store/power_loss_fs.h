#pragma once
// A RocksDB FileSystem that simulates a power cut: it passes every call to the real file system
// and remembers, per file, how much of what was written has been synced. After CutAfter(n), the
// n+1-th mutating call and every one after it fail with an IOError and change nothing (the
// machine is off). DropUnsynced() then makes the files on disk what a disk would hold after the
// cut, and the database can be reopened on them.
//
// What is modelled:
//   - a file's data survives up to the end of its last Sync/Fsync; the rest of it (the un-synced
//     tail) is cut off. Close, Flush and RangeSync (sync_file_range: no metadata, no barrier)
//     do not make data durable;
//   - a file created since the last fsync of its directory disappears, data and all, and so
//     does a file renamed to a new name since then.
// What is not (such calls are durable at once): a rename onto an existing name (RocksDB's
// CURRENT), since the old content cannot be brought back; deletions; directory creation.
// A file opened before this file system was made is taken as fully synced. Syncs are recorded,
// not performed: the disk under the test does not lose power, and real fsyncs would make the
// test slow without changing what it checks.
//
// Thread-safe: RocksDB's background threads call it concurrently.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

namespace ripplekv::store::testing {

class PowerLossFs : public rocksdb::FileSystemWrapper {
 public:
  PowerLossFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "PowerLossFs"; }

  // After `ops` more mutating calls (writes, syncs, creations, renames, deletions) the power
  // goes off.
  void CutAfter(uint64_t ops) {
    std::lock_guard<std::mutex> lock(mu_);
    cut_after_ = ops_ + ops;
  }
  bool IsCut() const {
    std::lock_guard<std::mutex> lock(mu_);
    return off_;
  }

  // Applies the power loss to the disk: deletes the files created since their directory's last
  // fsync and truncates every other file written through this file system to its synced size.
  // Call when nothing uses the file system any more (the store is closed).
  void DropUnsynced() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, file] : files_) {
      if (Unsynced(name)) {
        target()->DeleteFile(name, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
      } else if (file.size > file.synced) {
        std::error_code ec;  // the posix file system has no Truncate(name)
        std::filesystem::resize_file(name, file.synced, ec);
      }
    }
    files_.clear();
    unsynced_names_.clear();
  }

  // ---- FileSystem ----

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (!Tick()) return Off();
    const bool existed = target()->FileExists(name, rocksdb::IOOptions(), dbg).ok();
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, &file, dbg);
    if (!s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      files_[name] = FileState{};
      if (!existed) unsynced_names_[DirOf(name)].insert(name);
    }
    *result = std::make_unique<File>(std::move(file), this, name);
    return s;
  }

  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override {
    if (!Tick()) return Off();
    uint64_t size = 0;
    if (!target()->GetFileSize(name, rocksdb::IOOptions(), &size, dbg).ok()) size = 0;
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->ReopenWritableFile(name, options, &file, dbg);
    if (!s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!files_.contains(name)) files_[name] = FileState{.size = size, .synced = size};
    }
    *result = std::make_unique<File>(std::move(file), this, name);
    return s;
  }

  rocksdb::IOStatus ReuseWritableFile(const std::string&, const std::string&,
                                      const rocksdb::FileOptions&,
                                      std::unique_ptr<rocksdb::FSWritableFile>*,
                                      rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::NotSupported("PowerLossFs: recycled log files are not modelled");
  }

  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    rocksdb::IOStatus s = target()->NewDirectory(name, options, &dir, dbg);
    if (s.ok()) *result = std::make_unique<Directory>(std::move(dir), this, Normalize(name));
    return s;
  }

  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    if (!Tick()) return Off();
    const bool replaces = target()->FileExists(to, options, dbg).ok();
    rocksdb::IOStatus s = target()->RenameFile(from, to, options, dbg);
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = files_.find(from); it != files_.end()) {
      files_[to] = it->second;
      files_.erase(it);
    }
    Forget(from);
    Forget(to);
    // A new name is lost until its directory syncs; replacing a name is durable at once (see
    // the file comment).
    if (!replaces) unsynced_names_[DirOf(to)].insert(to);
    return s;
  }

  rocksdb::IOStatus DeleteFile(const std::string& name, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    if (!Tick()) return Off();
    rocksdb::IOStatus s = target()->DeleteFile(name, options, dbg);
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(name);
    Forget(name);
    return s;
  }

 private:
  struct FileState {
    uint64_t size = 0;    // bytes written
    uint64_t synced = 0;  // bytes that survive a power cut
  };

  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, PowerLossFs* fs, std::string name)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), name_(std::move(name)) {}

    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (!fs_->Tick()) return Off();
      rocksdb::IOStatus s = target()->Append(data, options, dbg);
      if (s.ok()) fs_->Written(name_, std::nullopt, data.size());
      return s;
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo&,
                             rocksdb::IODebugContext* dbg) override {
      return Append(data, options, dbg);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override {
      if (!fs_->Tick()) return Off();
      rocksdb::IOStatus s = target()->PositionedAppend(data, offset, options, dbg);
      if (s.ok()) fs_->Written(name_, offset, data.size());
      return s;
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                       const rocksdb::IOOptions& options,
                                       const rocksdb::DataVerificationInfo&,
                                       rocksdb::IODebugContext* dbg) override {
      return PositionedAppend(data, offset, options, dbg);
    }
    rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
      if (!fs_->Tick()) return Off();
      rocksdb::IOStatus s = target()->Truncate(size, options, dbg);
      if (s.ok()) fs_->Truncated(name_, size);
      return s;
    }
    rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* dbg) override {
      if (!fs_->Tick()) return Off();
      return target()->Flush(options, dbg);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      if (!fs_->Tick()) return Off();
      fs_->Synced(name_);
      return rocksdb::IOStatus::OK();
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      if (!fs_->Tick()) return Off();
      fs_->Synced(name_);
      return rocksdb::IOStatus::OK();
    }
    rocksdb::IOStatus RangeSync(uint64_t, uint64_t, const rocksdb::IOOptions&,
                                rocksdb::IODebugContext*) override {
      if (!fs_->Tick()) return Off();
      return rocksdb::IOStatus::OK();
    }
    rocksdb::IOStatus Close(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* dbg) override {
      // Always closes the descriptor; closing makes nothing durable.
      rocksdb::IOStatus s = target()->Close(options, dbg);
      return fs_->IsCut() ? Off() : s;
    }

   private:
    PowerLossFs* fs_;
    std::string name_;
  };

  class Directory : public rocksdb::FSDirectoryWrapper {
   public:
    Directory(std::unique_ptr<rocksdb::FSDirectory> dir, PowerLossFs* fs, std::string name)
        : FSDirectoryWrapper(std::move(dir)), fs_(fs), name_(std::move(name)) {}
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
      if (!fs_->Tick()) return Off();
      fs_->DirectorySynced(name_);
      return rocksdb::IOStatus::OK();
    }
    rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions&, rocksdb::IODebugContext*,
                                          const rocksdb::DirFsyncOptions&) override {
      if (!fs_->Tick()) return Off();
      fs_->DirectorySynced(name_);
      return rocksdb::IOStatus::OK();
    }

   private:
    PowerLossFs* fs_;
    std::string name_;
  };

  static rocksdb::IOStatus Off() { return rocksdb::IOStatus::IOError("PowerLossFs: power is off"); }
  static std::string Normalize(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return path;
  }
  static std::string DirOf(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : Normalize(path.substr(0, slash));
  }

  // Counts a mutating call; false once the power is off.
  bool Tick() {
    std::lock_guard<std::mutex> lock(mu_);
    if (off_) return false;
    if (cut_after_ && ops_ >= *cut_after_) {
      off_ = true;
      return false;
    }
    ++ops_;
    return true;
  }
  void Written(const std::string& name, std::optional<uint64_t> offset, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    FileState& file = files_[name];
    file.size = offset ? std::max(file.size, *offset + bytes) : file.size + bytes;
  }
  void Truncated(const std::string& name, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    FileState& file = files_[name];
    file.size = size;
    file.synced = std::min(file.synced, size);
  }
  void Synced(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    FileState& file = files_[name];
    file.synced = file.size;
  }
  void DirectorySynced(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    unsynced_names_.erase(dir);
  }
  // Callers hold mu_.
  bool Unsynced(const std::string& name) const {
    auto it = unsynced_names_.find(DirOf(name));
    return it != unsynced_names_.end() && it->second.contains(name);
  }
  void Forget(const std::string& name) {
    if (auto it = unsynced_names_.find(DirOf(name)); it != unsynced_names_.end()) {
      it->second.erase(name);
    }
  }

  mutable std::mutex mu_;
  uint64_t ops_ = 0;                   // mutating calls so far
  std::optional<uint64_t> cut_after_;  // ops_ at which the power goes
  bool off_ = false;
  std::map<std::string, FileState> files_;  // every file written through this file system
  // Per directory: names created (or renamed to) since its last fsync.
  std::map<std::string, std::set<std::string>> unsynced_names_;
};

// The Env to open a store with over `fs`: RocksDB's default threads and clock, except that once
// the power is off its sleeps return at once (RocksDB waits a second after a failed background
// compaction, which would only slow the test down).
inline std::shared_ptr<rocksdb::Env> PowerLossEnv(std::shared_ptr<PowerLossFs> fs) {
  class Env : public rocksdb::EnvWrapper {
   public:
    Env(std::shared_ptr<PowerLossFs> fs)
        : EnvWrapper(std::shared_ptr<rocksdb::Env>(rocksdb::NewCompositeEnv(fs))),
          fs_(std::move(fs)) {}
    const char* Name() const override { return "PowerLossEnv"; }
    void SleepForMicroseconds(int micros) override {
      if (!fs_->IsCut()) EnvWrapper::SleepForMicroseconds(micros);
    }

   private:
    std::shared_ptr<PowerLossFs> fs_;
  };
  return std::make_shared<Env>(std::move(fs));
}

}  // namespace ripplekv::store::testing
