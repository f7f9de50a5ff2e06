#pragma once
// Helpers shared by the store tests: a temporary directory and raw RocksDB access for planting
// damaged records.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "store/types.h"

namespace ripplekv::store::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/ripplekv_store_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The database path inside the directory (RocksDB creates it).
  std::string db() const { return path_ + "/db"; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `value` under `key` in column family `cf` of the (closed) database at `path`, bypassing
// the store, to plant a damaged record. Returns false (with a test failure) if RocksDB refuses.
inline bool PutRaw(const std::string& path, std::string_view cf, std::string_view key,
                   std::string_view value) {
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return false;
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &db);
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return false;
  }
  bool found = false;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == cf) {
      found = true;
      s = db->Put(rocksdb::WriteOptions(), handles[i], rocksdb::Slice(key.data(), key.size()),
                  rocksdb::Slice(value.data(), value.size()));
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : handles)
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete db;
  if (!found) ADD_FAILURE() << "no column family " << cf;
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  return found && s.ok();
}

// A job spec that CreateJob accepts.
inline JobSpec MakeSpec(std::string model_hash = "00ff", uint32_t trials = 2) {
  JobSpec spec;
  spec.model_path = "/models/smollm2.gguf";
  spec.model_hash = std::move(model_hash);
  spec.params.trials = trials;
  spec.params.samples = 4;
  return spec;
}

}  // namespace ripplekv::store::testing
