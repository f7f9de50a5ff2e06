#include "store/rocks_store.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <utility>

#include "base/strings.h"
#include "rocksdb/cache.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"
#include "rocksdb/version.h"
#include "store/codec.h"
#include "store/keys.h"

namespace ripplekv::store {
namespace {

constexpr size_t kMaxIdempotencyKeyBytes = 1024;

constexpr std::array<std::string_view, 11> kCfNames = {
    kJobsCf,    kTasksCf,      kResultsCf,      kProfilesCf, kBudgetMapsCf,  kMetaCf,
    kJobDataCf, kActiveJobsCf, kFinishedJobsCf, kRolloutsCf, kRolloutNodesCf};

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

std::string EncodeBe64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xFF);
  return out;
}

// The smallest key greater than every key starting with `prefix`; empty when there is none
// (prefix empty or all 0xFF).
std::string PrefixSuccessor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    auto last = static_cast<uint8_t>(out.back());
    if (last != 0xFF) {
      out.back() = static_cast<char>(last + 1);
      return out;
    }
    out.pop_back();
  }
  return out;
}

// RocksDB's log lines at warning and above, to StoreOptions::log (or stderr) instead of the LOG
// file in the database directory.
class ForwardingLogger final : public rocksdb::Logger {
 public:
  explicit ForwardingLogger(std::function<void(bool error, std::string_view line)> sink)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), sink_(std::move(sink)) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
    char buffer[2048];
    const int n = std::vsnprintf(buffer, sizeof(buffer), format, ap);
    if (n < 0) return;
    std::string_view line(buffer, std::min<size_t>(n, sizeof(buffer) - 1));
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.remove_suffix(1);
    const bool error = level >= rocksdb::InfoLogLevel::ERROR_LEVEL;
    if (sink_) {
      sink_(error, line);
    } else {
      std::fprintf(stderr, "rocksdb: %.*s\n", static_cast<int>(line.size()), line.data());
    }
  }

 private:
  const std::function<void(bool error, std::string_view line)> sink_;
};

bool Legal(JobState from, JobState to) {
  switch (from) {
    case JobState::kPending:
      return to == JobState::kRunning || to == JobState::kFailed || to == JobState::kCancelled;
    case JobState::kRunning:
      return to == JobState::kSucceeded || to == JobState::kFailed || to == JobState::kCancelled;
    default:
      return false;
  }
}

}  // namespace

Status FromRocks(const rocksdb::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = Cat(context, ": ", status.ToString());
  if (status.IsNotFound()) return absl::NotFoundError(message);
  if (status.IsCorruption()) return absl::DataLossError(message);
  if (status.IsNoSpace()) return absl::ResourceExhaustedError(message);
  if (status.IsBusy() || status.IsTimedOut() || status.IsTryAgain()) {
    return absl::UnavailableError(message);
  }
  // A held database lock reads "While lock file: <db>/LOCK: Resource temporarily unavailable"
  // (another process) or "lock hold by current process ... <db>/LOCK" (this one).
  if (status.IsIOError() && (message.find("/LOCK") != std::string::npos ||
                             message.find("lock hold") != std::string::npos)) {
    return absl::UnavailableError(Cat(message, " (the database is open elsewhere)"));
  }
  return absl::InternalError(message);
}

std::string RocksDbVersion() { return rocksdb::GetRocksVersionAsString(); }

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path, const StoreOptions& options) {
  return OpenRocksStore(path, options, nullptr);
}

StatusOr<std::unique_ptr<Store>> OpenRocksStore(const std::string& path,
                                                const StoreOptions& options,
                                                std::shared_ptr<rocksdb::Env> env) {
  ASSIGN_OR_RETURN(std::unique_ptr<RocksStore> store, RocksStore::Open(path, options, env));
  return std::unique_ptr<Store>(std::move(store));
}

StatusOr<std::unique_ptr<RocksStore>> RocksStore::Open(const std::string& path,
                                                       const StoreOptions& options,
                                                       std::shared_ptr<rocksdb::Env> env) {
  const std::string context = Cat("store ", path);
  rocksdb::DBOptions db_options;
  if (env) db_options.env = env.get();
  const bool exists = db_options.env->FileExists(path + "/CURRENT").ok();
  if (!exists && !options.create_if_missing) {
    return absl::NotFoundError(Cat(context, ": no database (and create_if_missing is off)"));
  }
  if (exists) {
    // Refuse a RocksDB database that is not ours rather than adding our families to it.
    std::vector<std::string> families;
    RETURN_IF_ERROR(
        FromRocks(rocksdb::DB::ListColumnFamilies(db_options, path, &families), context));
    for (const std::string& name : families) {
      if (name != rocksdb::kDefaultColumnFamilyName &&
          std::find(kCfNames.begin(), kCfNames.end(), name) == kCfNames.end()) {
        return absl::FailedPreconditionError(
            Cat(context, ": not a RippleKV store (unknown column family '", name, "')"));
      }
    }
  }
  // Damage in the write-ahead log is found here, before RocksDB's point-in-time replay would
  // drop it in silence (store/wal_check.h).
  WalCheck wal;
  if (exists) {
    StatusOr<WalCheck> checked = CheckWal(db_options.env, path, options.accept_wal_loss);
    if (!checked.ok()) {
      return Status(checked.status().code(),
                    Cat(context, ": ", std::string(checked.status().message())));
    }
    wal = *std::move(checked);
  }

  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = true;
  db_options.info_log = std::make_shared<ForwardingLogger>(options.log);
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  // Memory (StoreOptions::memtable_bytes, block_cache_bytes): one budget for every family.
  db_options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(options.memtable_bytes);
  rocksdb::BlockBasedTableOptions table_options;
  table_options.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  rocksdb::ColumnFamilyOptions family_options;
  family_options.write_buffer_size = std::max<uint64_t>(options.memtable_bytes / 4, 1ull << 20);
  family_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, family_options);
  for (std::string_view name : kCfNames) {
    descriptors.emplace_back(std::string(name), family_options);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, path, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, context);

  std::unique_ptr<RocksStore> store(new RocksStore(
      options, std::move(env), std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
  Status init = store->Initialize();
  store->recovery_notes_ = std::move(wal.notes);
  if (init.ok()) init = store->RaiseIdCounters(wal.damage ? &wal.damage->dropped : nullptr);
  if (!init.ok()) return Status(init.code(), Cat(context, ": ", std::string(init.message())));
  return store;
}

RocksStore::RocksStore(StoreOptions options, std::shared_ptr<rocksdb::Env> env,
                       std::unique_ptr<rocksdb::DB> db,
                       std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : options_(std::move(options)),
      env_(std::move(env)),
      db_(std::move(db)),
      handles_(std::move(handles)) {
  // handles_[0] is "default"; the others follow kCfNames.
  for (size_t i = 0; i < kNumCfs; ++i) cf_[i] = handles_[i + 1];
}

RocksStore::~RocksStore() {
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db_->Close().PermitUncheckedError();
}

Status RocksStore::Initialize() {
  ASSIGN_OR_RETURN(std::optional<std::string> schema, Get(kMeta, kSchemaVersionKey));
  if (schema.has_value() && *schema != kSchemaVersion && *schema != kSchemaVersion1 &&
      *schema != kSchemaVersion2 && *schema != kSchemaVersion3) {
    return absl::FailedPreconditionError(Cat("schema version '", *schema, "'; this build reads ",
                                             kSchemaVersion1, ", ", kSchemaVersion2, ", ",
                                             kSchemaVersion3, " and ", kSchemaVersion));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  // Each step is one write of its own: a crash between them leaves a database of the version
  // that step starts from, which the next open migrates on.
  if (schema.has_value() && *schema == kSchemaVersion1) {
    RETURN_IF_ERROR(MigrateFromV1());
    schema = std::string(kSchemaVersion2);
  }
  if (schema.has_value() && *schema == kSchemaVersion2) {
    RETURN_IF_ERROR(MigrateFromV2());
    schema = std::string(kSchemaVersion3);
  }
  if (schema.has_value() && *schema == kSchemaVersion3) {
    RETURN_IF_ERROR(MigrateFromV3());
    schema = std::string(kSchemaVersion);
  }
  rocksdb::WriteBatch batch;
  if (!schema.has_value())
    RETURN_IF_ERROR(PutRaw(&batch, kMeta, kSchemaVersionKey, kSchemaVersion));
  if (options_.release_leases_on_open) {
    ASSIGN_OR_RETURN(std::vector<TaskKey> released,
                     ReleaseLeasesWhere(&batch, [](const Task&) { return true; }));
    recovered_leases_ = released.size();
  }
  if (batch.Count() > 0) RETURN_IF_ERROR(Write(&batch));
  CompactActiveIndex();
  return absl::OkStatus();
}

// Deletions in active_jobs between compactions; bounds what an active-only listing steps over.
constexpr uint64_t kActiveIndexCompactionEvery = 256;

void RocksStore::NoteJobsFinished(uint64_t jobs) {
  if (finished_since_compaction_.fetch_add(jobs) + jobs >= kActiveIndexCompactionEvery) {
    finished_since_compaction_.store(0);
    CompactActiveIndex();
  }
}

void RocksStore::CompactActiveIndex() {
  if (write_failed_.load()) return;
  db_->Flush(rocksdb::FlushOptions(), cf_[kActiveJobs]).PermitUncheckedError();
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  db_->CompactRange(options, cf_[kActiveJobs], nullptr, nullptr).PermitUncheckedError();
}

void RocksStore::ClearLease(Task* task) {
  task->state = TaskState::kPending;
  task->lease_owner.clear();
  task->lease_deadline_ms = 0;
}

std::string_view RocksStore::CfName(Cf cf) { return kCfNames[cf]; }

Status RocksStore::Damaged(Cf cf, std::string_view key, const Status& status) {
  return absl::DataLossError(
      Cat(DescribeKey(CfName(cf), key), ": ", std::string(status.message())));
}

TimeMs RocksStore::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StatusOr<std::optional<std::string>> RocksStore::Get(Cf cf, std::string_view key,
                                                     const rocksdb::Snapshot* snapshot) const {
  std::string value;
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  rocksdb::Status s = db_->Get(read_options, cf_[cf], ToSlice(key), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, Cat("reading ", DescribeKey(CfName(cf), key)));
  return std::optional<std::string>(std::move(value));
}

Status RocksStore::Scan(Cf cf, std::string_view prefix, const ScanFn& fn, bool values,
                        const rocksdb::Snapshot* snapshot) const {
  const std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read_options;  // an iterator reads from one implicit snapshot
  read_options.snapshot = snapshot;
  if (!upper.empty()) read_options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options, cf_[cf]));
  for (it->Seek(ToSlice(prefix)); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    const std::string_view key(k.data(), k.size());
    std::string_view value;
    if (values) value = std::string_view(it->value().data(), it->value().size());
    RETURN_IF_ERROR(fn(key, value));
  }
  return FromRocks(it->status(), Cat("scanning column family '", CfName(cf), "'"));
}

StatusOr<Job> RocksStore::ReadJob(JobId id, bool with_data,
                                  const rocksdb::Snapshot* snapshot) const {
  if (with_data && snapshot == nullptr) {
    // A purge may delete the data between the two reads: read both from one snapshot.
    SnapshotHolder held(db_.get());
    return ReadJob(id, with_data, held.get());
  }
  const std::string key = JobKey(id);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kJobs, key, snapshot));
  if (!value) return absl::NotFoundError(Cat("job ", id, " not found"));
  StatusOr<Job> job = decoded_jobs_.Decode(id, *value);
  if (!job.ok()) return Damaged(kJobs, key, job.status());
  if (with_data) {
    ASSIGN_OR_RETURN(std::optional<std::string> data, Get(kJobData, key, snapshot));
    if (data) {
      StatusOr<std::string> text = DecodeJobData(*data);
      if (!text.ok()) return Damaged(kJobData, key, text.status());
      job->spec.data_inline = *std::move(text);
    }
  }
  return job;
}

StatusOr<Job> RocksStore::ReadUnpurgedJob(JobId id) const {
  ASSIGN_OR_RETURN(Job job, ReadJob(id));
  if (job.purged_at_ms != 0) {
    return absl::FailedPreconditionError(
        Cat("job ", id, " was purged at ", job.purged_at_ms,
            " (ms since the epoch): its tasks, results and inline data are deleted"));
  }
  return job;
}

StatusOr<Task> RocksStore::ReadTask(const TaskKey& key) const {
  const std::string bytes = TaskKeyBytes(key);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kTasks, bytes));
  if (!value) {
    return absl::NotFoundError(
        Cat("task job=", key.job, " sample=", key.sample, " layer=", key.layer, " not found"));
  }
  StatusOr<Task> task = DecodeTask(key, *value);
  if (!task.ok()) return Damaged(kTasks, bytes, task.status());
  return task;
}

StatusOr<std::vector<Task>> RocksStore::ScanTasks(JobId job) const {
  std::vector<Task> tasks;
  RETURN_IF_ERROR(Scan(kTasks, JobKey(job), [&](std::string_view key, std::string_view value) {
    std::optional<TaskKey> parsed = ParseTaskKey(key);
    if (!parsed) return Damaged(kTasks, key, absl::DataLossError("malformed key"));
    StatusOr<Task> task = DecodeTask(*parsed, value);
    if (!task.ok()) return Damaged(kTasks, key, task.status());
    tasks.push_back(*std::move(task));
    return absl::OkStatus();
  }));
  return tasks;
}

StatusOr<std::vector<Job>> RocksStore::ScanJobs() const {
  std::vector<Job> jobs;
  RETURN_IF_ERROR(Scan(kJobs, "", [&](std::string_view key, std::string_view value) {
    std::optional<JobId> id = ParseJobKey(key);
    if (!id) return Damaged(kJobs, key, absl::DataLossError("malformed key"));
    StatusOr<Job> job = DecodeJob(*id, value);
    if (!job.ok()) return Damaged(kJobs, key, job.status());
    jobs.push_back(*std::move(job));
    return absl::OkStatus();
  }));
  return jobs;
}

StatusOr<std::vector<Job>> RocksStore::ScanActiveJobs() const {
  SnapshotHolder snapshot(db_.get());
  std::vector<Job> jobs;
  RETURN_IF_ERROR(Scan(
      kActiveJobs, "",
      [&](std::string_view key, std::string_view) {
        std::optional<JobId> id = ParseJobKey(key);
        if (!id) return Damaged(kActiveJobs, key, absl::DataLossError("malformed key"));
        StatusOr<Job> job = ReadJob(*id, /*with_data=*/false, snapshot.get());
        if (absl::IsNotFound(job.status())) {
          return Damaged(kActiveJobs, key, absl::DataLossError("names a missing job"));
        }
        if (!job.ok()) return job.status();
        if (IsTerminal(job->state)) {
          return Damaged(kActiveJobs, key,
                         absl::DataLossError(Cat("names a ", JobStateName(job->state), " job")));
        }
        jobs.push_back(*std::move(job));
        return absl::OkStatus();
      },
      /*values=*/false, snapshot.get()));
  return jobs;
}

Status RocksStore::Write(rocksdb::WriteBatch* batch) {
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_writes;
  return ObservedWrite(write_options, batch, "writing a batch");
}

Status RocksStore::WriteLeases(rocksdb::WriteBatch* batch) {
  rocksdb::WriteOptions write_options;
  write_options.sync = false;  // see the header: nothing a reopen keeps depends on it
  return ObservedWrite(write_options, batch, "writing a lease batch");
}

Status RocksStore::WriteUnsynced(rocksdb::WriteBatch* batch) {
  return ObservedWrite(rocksdb::WriteOptions(), batch, "writing a batch");
}

Status RocksStore::ObservedWrite(const rocksdb::WriteOptions& write_options,
                                 rocksdb::WriteBatch* batch, std::string_view what) {
  RETURN_IF_ERROR(CheckWritable());
  const auto start = std::chrono::steady_clock::now();
  const rocksdb::Status s = db_->Write(write_options, batch);
  if (options_.write_observer) {
    options_.write_observer(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!s.ok()) return LatchWriteFailure(s, what);
  return absl::OkStatus();
}

Status RocksStore::SyncLog() {
  if (!options_.sync_writes) return absl::OkStatus();
  RETURN_IF_ERROR(CheckWritable());
  const auto start = std::chrono::steady_clock::now();
  const rocksdb::Status s = db_->SyncWAL();
  if (options_.write_observer) {
    options_.write_observer(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!s.ok()) return LatchWriteFailure(s, "syncing the write-ahead log");
  return absl::OkStatus();
}

Status RocksStore::CheckWritable() const {
  if (!write_failed_.load()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(failure_mu_);
  return write_failure_->status;
}

Status RocksStore::LatchWriteFailure(const rocksdb::Status& s, std::string_view what) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (!write_failure_) {
    // The message a caller (a gRPC client) sees: the kind of failure, never a file path.
    const Status status =
        s.IsNoSpace() || s.subcode() == rocksdb::Status::kSpaceLimit
            ? absl::ResourceExhaustedError(
                  "the scheduler's disk is full: changes are refused until space is freed "
                  "(reads go on)")
            : absl::UnavailableError(
                  "the scheduler's database cannot write (an I/O error): changes are refused "
                  "until it recovers (reads go on)");
    write_failure_ = WriteFailure{.status = status, .detail = Cat(what, ": ", s.ToString())};
    write_failed_.store(true);
  }
  return write_failure_->status;
}

std::optional<WriteFailure> RocksStore::write_failure() const {
  if (!write_failed_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(failure_mu_);
  return write_failure_;
}

Status RocksStore::PutRaw(rocksdb::WriteBatch* batch, Cf cf, std::string_view key,
                          std::string_view value) const {
  if (value.size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(
        Cat(DescribeKey(CfName(cf), key), ": the record encodes to ", value.size(),
            " bytes; the limit is ", options_.max_value_bytes, " (StoreOptions::max_value_bytes)"));
  }
  return FromRocks(batch->Put(cf_[cf], ToSlice(key), ToSlice(value)), "adding to a batch");
}

Status RocksStore::PutJob(rocksdb::WriteBatch* batch, const Job& job) const {
  ASSIGN_OR_RETURN(std::string value, EncodeJob(job));
  RETURN_IF_ERROR(PutRaw(batch, kJobs, JobKey(job.id), value));
  decoded_jobs_.Remember(job, value);
  return absl::OkStatus();
}

Status RocksStore::PutFinishedJob(rocksdb::WriteBatch* batch, const Job& job) const {
  RETURN_IF_ERROR(PutJob(batch, job));
  RETURN_IF_ERROR(Delete(batch, kActiveJobs, JobKey(job.id)));
  return PutRaw(batch, kFinishedJobs, FinishedJobKey(job.updated_at_ms, job.id), "");
}

Status RocksStore::Delete(rocksdb::WriteBatch* batch, Cf cf, std::string_view key) const {
  return FromRocks(batch->Delete(cf_[cf], ToSlice(key)), "adding to a batch");
}

Status RocksStore::PutTask(rocksdb::WriteBatch* batch, const Task& task) const {
  ASSIGN_OR_RETURN(std::string value, EncodeTask(task));
  return PutRaw(batch, kTasks, TaskKeyBytes(task.key), value);
}

StatusOr<std::vector<TaskKey>> RocksStore::ReleaseLeasesWhere(
    rocksdb::WriteBatch* batch, const std::function<bool(const Task&)>& expired) {
  // Only active jobs hold leases: entering a final state releases them (UpdateJobState).
  ASSIGN_OR_RETURN(std::vector<Job> jobs, ScanActiveJobs());
  std::vector<TaskKey> released;
  for (const Job& job : jobs) {
    ASSIGN_OR_RETURN(std::vector<Task> tasks, ScanTasks(job.id));
    for (Task& task : tasks) {
      if (task.state != TaskState::kLeased || !expired(task)) continue;
      ClearLease(&task);
      RETURN_IF_ERROR(PutTask(batch, task));
      released.push_back(task.key);
    }
  }
  return released;
}

// ---- Jobs ----

StatusOr<CreateJobOutcome> RocksStore::CreateJob(const JobSpec& spec,
                                                 std::span<const PlannedTask> tasks) {
  RETURN_IF_ERROR(ValidateModelHash(spec.model_hash));
  if (spec.params.trials == 0) return absl::InvalidArgumentError("params.trials is 0");
  if (spec.idempotency_key.size() > kMaxIdempotencyKeyBytes) {
    return absl::InvalidArgumentError(Cat("idempotency_key is ", spec.idempotency_key.size(),
                                          " bytes; at most ", kMaxIdempotencyKeyBytes));
  }
  if (tasks.empty()) return absl::InvalidArgumentError("a job needs at least one task");
  if (tasks.size() > options_.max_tasks_per_job) {
    return absl::InvalidArgumentError(Cat("the job has ", tasks.size(), " tasks; at most ",
                                          options_.max_tasks_per_job, " allowed"));
  }
  std::vector<std::pair<uint32_t, uint32_t>> sorted;
  sorted.reserve(tasks.size());
  for (const PlannedTask& t : tasks) sorted.emplace_back(t.sample, t.layer);
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return absl::InvalidArgumentError(
        Cat("task (sample ", dup->first, ", layer ", dup->second, ") is listed twice"));
  }

  std::lock_guard<std::mutex> lock(write_mu_);
  const std::string idempotency_key = Cat(kIdempotencyPrefix, spec.idempotency_key);
  if (!spec.idempotency_key.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> existing, Get(kMeta, idempotency_key));
    if (existing) {
      if (existing->size() != 8) {
        return Damaged(kMeta, idempotency_key, absl::DataLossError("job id is not 8 bytes"));
      }
      const JobId id = *ParseJobKey(*existing);
      StatusOr<Job> job = ReadJob(id, /*with_data=*/true);
      if (absl::IsNotFound(job.status())) {
        return Damaged(kMeta, idempotency_key, absl::DataLossError(Cat("names missing job ", id)));
      }
      if (!job.ok()) return job.status();
      if (!(job->spec == spec)) {
        return absl::AlreadyExistsError(Cat("idempotency key '", spec.idempotency_key,
                                            "' already names job ", id, " with a different spec"));
      }
      return CreateJobOutcome{.job = *std::move(job), .created = false};
    }
  }

  ASSIGN_OR_RETURN(std::optional<std::string> next, Get(kMeta, kNextJobIdKey));
  JobId id = 1;
  if (next) {
    std::optional<JobId> parsed = ParseJobKey(*next);
    if (!parsed || *parsed == kNoJob) {
      return Damaged(kMeta, kNextJobIdKey, absl::DataLossError("not a job id"));
    }
    id = *parsed;
  }

  Job job;
  job.id = id;
  job.spec = spec;
  job.state = JobState::kPending;
  job.created_at_ms = job.updated_at_ms = Now();
  job.tasks_total = tasks.size();
  job.data_inline_bytes = spec.data_inline.size();
  job.samples_planned = spec.params.samples;

  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutJob(&batch, job));
  RETURN_IF_ERROR(PutRaw(&batch, kActiveJobs, JobKey(id), ""));
  if (!spec.data_inline.empty()) {
    ASSIGN_OR_RETURN(std::string data, EncodeJobData(spec.data_inline));
    RETURN_IF_ERROR(PutRaw(&batch, kJobData, JobKey(id), data));
  }
  for (const auto& [sample, layer] : sorted) {
    RETURN_IF_ERROR(PutTask(&batch, Task{.key = {.job = id, .sample = sample, .layer = layer}}));
  }
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, kNextJobIdKey, EncodeBe64(id + 1)));
  if (!spec.idempotency_key.empty()) {
    RETURN_IF_ERROR(PutRaw(&batch, kMeta, idempotency_key, EncodeBe64(id)));
  }
  RETURN_IF_ERROR(Write(&batch));
  return CreateJobOutcome{.job = std::move(job), .created = true};
}

StatusOr<Job> RocksStore::GetJob(JobId id) const { return ReadJob(id, /*with_data=*/true); }

StatusOr<Job> RocksStore::GetJobMeta(JobId id) const { return ReadJob(id, /*with_data=*/false); }

StatusOr<std::vector<Job>> RocksStore::ListJobs(const ListJobsOptions& options) const {
  std::vector<Job> jobs;
  if (options.active_only) {
    ASSIGN_OR_RETURN(jobs, ScanActiveJobs());
  } else {
    ASSIGN_OR_RETURN(jobs, ScanJobs());
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
    if (a.created_at_ms != b.created_at_ms) return a.created_at_ms < b.created_at_ms;
    return a.id < b.id;
  });
  return jobs;
}

StatusOr<Job> RocksStore::UpdateJobState(JobId id, JobState state, const std::string& error) {
  RETURN_IF_ERROR(CheckUtf8(error, "error"));
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(id));
  if (!Legal(job.state, state)) {
    return absl::FailedPreconditionError(Cat("job ", id, " is ", JobStateName(job.state),
                                             "; it cannot become ", JobStateName(state)));
  }
  if (state == JobState::kSucceeded && job.tasks_done != job.tasks_total) {
    return absl::FailedPreconditionError(Cat("job ", id, " has ", job.tasks_done, " of ",
                                             job.tasks_total, " tasks done; it cannot succeed"));
  }
  rocksdb::WriteBatch batch;
  if (IsTerminal(state)) {
    ASSIGN_OR_RETURN(std::vector<Task> tasks, ScanTasks(id));
    for (Task& task : tasks) {
      if (task.state != TaskState::kLeased) continue;
      ClearLease(&task);
      RETURN_IF_ERROR(PutTask(&batch, task));
    }
  }
  job.state = state;
  job.error = error;
  job.updated_at_ms = Now();
  if (IsTerminal(state)) {
    RETURN_IF_ERROR(PutFinishedJob(&batch, job));
  } else {
    RETURN_IF_ERROR(PutJob(&batch, job));
  }
  RETURN_IF_ERROR(Write(&batch));
  if (IsTerminal(state)) NoteJobsFinished(1);
  return job;
}

StatusOr<Job> RocksStore::SetDataDescription(JobId id, std::string_view description) {
  if (description.empty() || description.size() > 4096) {
    return absl::InvalidArgumentError(
        Cat("data description of job ", id, ": ", description.size(), " bytes, want 1..4096"));
  }
  RETURN_IF_ERROR(CheckUtf8(description, "data_description"));
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(id));
  if (!job.data_description.empty()) return job;
  job.data_description = std::string(description);
  job.updated_at_ms = Now();
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutJob(&batch, job));
  RETURN_IF_ERROR(Write(&batch));
  return job;
}

StatusOr<Job> RocksStore::ExtendJob(JobId id, uint32_t samples_planned,
                                    std::span<const PlannedTask> tasks) {
  if (tasks.empty()) return absl::InvalidArgumentError("a round needs at least one task");
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(Job job, ReadJob(id));
  auto refuse = [&](std::string_view why) {
    return absl::FailedPreconditionError(Cat("job ", id, " cannot be extended: ", why));
  };
  if (job.purged_at_ms != 0) return refuse("it was purged");
  if (job.state != JobState::kRunning) return refuse(Cat("it is ", JobStateName(job.state)));
  if (!job.spec.params.until_stable) return refuse("it is not an until_stable job");
  if (job.tasks_done != job.tasks_total) {
    return refuse(Cat(job.tasks_done, " of its ", job.tasks_total, " tasks are done"));
  }
  if (samples_planned <= job.samples_planned || samples_planned > job.spec.params.max_samples) {
    return refuse(Cat("samples ", samples_planned, " is not in (", job.samples_planned, ", ",
                      job.spec.params.max_samples, "] (samples planned, max_samples]"));
  }
  if (job.tasks_total + tasks.size() > options_.max_tasks_per_job) {
    return absl::InvalidArgumentError(Cat("job ", id, " would have ",
                                          job.tasks_total + tasks.size(), " tasks; at most ",
                                          options_.max_tasks_per_job, " allowed"));
  }
  std::vector<std::pair<uint32_t, uint32_t>> sorted;
  sorted.reserve(tasks.size());
  for (const PlannedTask& t : tasks) {
    if (t.sample < job.samples_planned || t.sample >= samples_planned) {
      return absl::InvalidArgumentError(Cat("task (sample ", t.sample, ", layer ", t.layer,
                                            ") is outside the round's samples [",
                                            job.samples_planned, ", ", samples_planned, ")"));
    }
    sorted.emplace_back(t.sample, t.layer);
  }
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return absl::InvalidArgumentError(
        Cat("task (sample ", dup->first, ", layer ", dup->second, ") is listed twice"));
  }
  rocksdb::WriteBatch batch;
  for (const auto& [sample, layer] : sorted) {
    const Task task{.key = {.job = id, .sample = sample, .layer = layer}};
    ASSIGN_OR_RETURN(std::optional<std::string> existing, Get(kTasks, TaskKeyBytes(task.key)));
    if (existing) {
      return refuse(Cat("task (sample ", sample, ", layer ", layer, ") exists already"));
    }
    RETURN_IF_ERROR(PutTask(&batch, task));
  }
  job.tasks_total += tasks.size();
  job.samples_planned = samples_planned;
  job.data_description.clear();  // it names the sample count: the next round reports its own
  job.updated_at_ms = Now();
  RETURN_IF_ERROR(PutJob(&batch, job));
  RETURN_IF_ERROR(Write(&batch));
  return job;
}

}  // namespace ripplekv::store
