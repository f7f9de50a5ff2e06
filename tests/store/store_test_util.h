#pragma once
// Helpers shared by the store tests: a temporary directory and raw RocksDB access for planting
// damaged records.

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "store/store.h"
#include "store/types.h"
#include "tests/common/temp_dir.h"

namespace ripplekv::store::testing {

// A fresh directory (tests/common/temp_dir.h) with the database path inside it.
class TempDir : public ripplekv::testing::TempDir {
 public:
  // The database path inside the directory (RocksDB creates it).
  std::string db() const { return File("db"); }
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

// The value under `key` in column family `cf` of the (closed) database at `path`, read around the
// store; nullopt when absent (or, with a test failure, when RocksDB refuses).
inline std::optional<std::string> GetRaw(const std::string& path, std::string_view cf,
                                         std::string_view key) {
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return std::nullopt;
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, descriptors, &handles, &db);
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return std::nullopt;
  }
  std::optional<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] != cf) continue;
    std::string value;
    s = db->Get(rocksdb::ReadOptions(), handles[i], rocksdb::Slice(key.data(), key.size()), &value);
    if (s.ok()) out = std::move(value);
    if (!s.ok() && !s.IsNotFound()) ADD_FAILURE() << s.ToString();
  }
  for (rocksdb::ColumnFamilyHandle* h : handles)
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete db;
  return out;
}

// Deterministic stand-in for a trial's KL.
inline double Kl(const TaskKey& key, uint32_t trial) {
  return 0.001 * (key.sample + 1) + 0.01 * key.layer + 1e-7 * trial + 1.0 / 3.0;
}

// Results of trials first..end-1 of task `key`, with Kl() values.
inline std::vector<TrialResult> Trials(const TaskKey& key, uint32_t first, uint32_t end) {
  std::vector<TrialResult> out;
  for (uint32_t t = first; t < end; ++t) {
    out.push_back(
        {.job = key.job, .sample = key.sample, .layer = key.layer, .trial = t, .kl = Kl(key, t)});
  }
  return out;
}

// A store opened over a fresh directory, unsynced, on a clock the test drives (now_).
class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  // Closes the store (if open) and opens it again on the same directory.
  void Reopen() {
    store_.reset();
    StatusOr<std::unique_ptr<Store>> opened = OpenStore(dir_.db(), options_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = *std::move(opened);
  }

  TempDir dir_;
  TimeMs now_ = 1'000'000;
  StoreOptions options_{.sync_writes = false, .clock = [this] { return now_; }};
  std::unique_ptr<Store> store_;
};

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
