#include "store/wal_check.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <utility>

#include "base/strings.h"
#include "rocksdb/db.h"
#include "rocksdb/file_checksum.h"
#include "rocksdb/wal_filter.h"
#include "rocksdb/write_batch.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

// The log format (RocksDB db/log_format.h): blocks of kBlockSize bytes; each physical record is
// a header, checksum (4 bytes, masked crc32c of type [+ log number] + payload, little-endian),
// length (2 bytes, little-endian), type (1 byte), [log number (4 bytes) in recyclable records],
// then the payload. A record never crosses a block; a logical record (a WriteBatch) longer than
// what is left of a block is split into first, middle and last fragments. Fewer than a header's
// bytes at the end of a block are zero padding.
constexpr uint64_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;
constexpr size_t kRecyclableHeaderSize = 11;
enum RecordType : uint8_t {
  kZeroType = 0,
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
  kRecyclableFullType = 5,
  kRecyclableLastType = 8,
  kSetCompressionType = 9,
};
constexpr size_t kWriteBatchHeader = 12;  // sequence (8) + count (4)

uint32_t DecodeLe32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

uint64_t DecodeBe64(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

// RocksDB stores crc32c values "masked" (util/crc32c.h): rotated right by 15 bits plus a
// constant, since a CRC of data that embeds CRCs is weak.
uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// crc32c of `header_tail` (the type byte and, in recyclable records, the log number) followed by
// `payload`, through RocksDB's public checksum generator (big-endian result, not masked).
uint32_t Crc32c(std::string_view header_tail, std::string_view payload) {
  static const std::shared_ptr<rocksdb::FileChecksumGenFactory> factory =
      rocksdb::GetFileChecksumGenCrc32cFactory();
  std::unique_ptr<rocksdb::FileChecksumGenerator> gen =
      factory->CreateFileChecksumGenerator(rocksdb::FileChecksumGenContext());
  gen->Update(header_tail.data(), header_tail.size());
  gen->Update(payload.data(), payload.size());
  gen->Finalize();
  const std::string sum = gen->GetChecksum();
  uint32_t v = 0;
  for (char c : sum) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

// The writes of the records after a damage, by column family id (names come later).
struct RawDropped {
  uint64_t records = 0;
  std::map<uint32_t, uint64_t> writes;
  std::map<uint32_t, uint64_t> max_prefix;
  uint64_t max_next_job_id = 0;
  uint64_t max_next_rollout_id = 0;
  bool unparsed = false;

  void Merge(const RawDropped& o) {
    records += o.records;
    for (const auto& [cf, n] : o.writes) writes[cf] += n;
    for (const auto& [cf, v] : o.max_prefix) max_prefix[cf] = std::max(max_prefix[cf], v);
    max_next_job_id = std::max(max_next_job_id, o.max_next_job_id);
    max_next_rollout_id = std::max(max_next_rollout_id, o.max_next_rollout_id);
    unparsed = unparsed || o.unparsed;
  }
};

// Tallies one WriteBatch into a RawDropped.
class Tally : public rocksdb::WriteBatch::Handler {
 public:
  explicit Tally(RawDropped* out) : out_(out) {}
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    Note(cf, key);
    const std::string_view k(key.data(), key.size());
    if (value.size() == 8 && (k == kNextJobIdKey || k == kNextRolloutIdKey)) {
      uint64_t& max = k == kNextJobIdKey ? out_->max_next_job_id : out_->max_next_rollout_id;
      max = std::max(max, DecodeBe64(std::string_view(value.data(), 8)));
    }
    return rocksdb::Status::OK();
  }
  rocksdb::Status PutEntityCF(uint32_t cf, const rocksdb::Slice& key,
                              const rocksdb::Slice&) override {
    Note(cf, key);
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    Note(cf, key);
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    Note(cf, key);
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const rocksdb::Slice& begin,
                                const rocksdb::Slice&) override {
    Note(cf, begin);
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice& key, const rocksdb::Slice&) override {
    Note(cf, key);
    return rocksdb::Status::OK();
  }
  rocksdb::Status PutBlobIndexCF(uint32_t cf, const rocksdb::Slice& key,
                                 const rocksdb::Slice&) override {
    Note(cf, key);
    return rocksdb::Status::OK();
  }
  rocksdb::Status MarkBeginPrepare(bool) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkEndPrepare(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkNoop(bool) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkRollback(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkCommit(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status MarkCommitWithTimestamp(const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }

 private:
  void Note(uint32_t cf, const rocksdb::Slice& key) {
    ++out_->writes[cf];
    if (key.size() >= 8) {
      uint64_t& max = out_->max_prefix[cf];
      max = std::max(max, DecodeBe64(std::string_view(key.data(), 8)));
    }
  }
  RawDropped* out_;
};

// One log file, read record by record.
struct LogScan {
  std::string file;
  uint64_t number = 0;
  uint64_t size = 0;
  std::optional<uint64_t> damage_offset;  // the first unreadable record
  std::string reason;
  RawDropped after_damage;  // intact records after the damage
  RawDropped all;           // every intact record of the file
};

class LogScanner {
 public:
  explicit LogScanner(LogScan* scan) : scan_(scan) {}

  Status Run(rocksdb::Env* env) {
    std::unique_ptr<rocksdb::SequentialFile> file;
    rocksdb::Status s = env->NewSequentialFile(scan_->file, &file, rocksdb::EnvOptions());
    if (!s.ok()) return FromRocks(s, Cat("opening write-ahead log ", scan_->file));
    std::string block(kBlockSize, '\0');
    for (uint64_t block_start = 0;; block_start += kBlockSize) {
      size_t n = 0;
      while (n < kBlockSize) {
        rocksdb::Slice got;
        s = file->Read(kBlockSize - n, &got, block.data() + n);
        if (!s.ok()) return FromRocks(s, Cat("reading write-ahead log ", scan_->file));
        if (got.empty()) break;
        // The file may return its own buffer instead of filling the scratch one.
        if (got.data() != block.data() + n) {
          std::copy(got.data(), got.data() + got.size(), block.data() + n);
        }
        n += got.size();
      }
      const bool last = n < kBlockSize;
      if (!ScanBlock(std::string_view(block.data(), n), block_start, last)) break;
      if (last) break;
    }
    if (in_fragment_)
      Damage(fragment_offset_, "record without its last fragment at the end of the file");
    return absl::OkStatus();
  }

 private:
  // Returns false at the end of the log's data (an old record of a recycled log).
  bool ScanBlock(std::string_view b, uint64_t block_start, bool last) {
    size_t p = 0;
    while (p < b.size()) {
      const size_t left = b.size() - p;
      const bool resyncing = resync_;
      if (left < kHeaderSize) {
        // Padding at the end of a full block; at the end of the file, a torn header unless zero.
        if (last && !resyncing && b.substr(p).find_first_not_of('\0') != std::string_view::npos) {
          Damage(block_start + p, "record header cut off at the end of the file");
        }
        return true;
      }
      const char* h = b.data() + p;
      const uint32_t length = static_cast<uint8_t>(h[4]) | (static_cast<uint8_t>(h[5]) << 8);
      const uint8_t type = static_cast<uint8_t>(h[6]);
      if (type == kZeroType && length == 0 && !resyncing) return true;  // preallocated zeros
      const bool recyclable = type >= kRecyclableFullType && type <= kRecyclableLastType;
      const size_t header = recyclable ? kRecyclableHeaderSize : kHeaderSize;
      const bool known = type >= kFullType && type <= kSetCompressionType;
      if (!known || header + length > left) {
        if (resyncing) {
          ++p;
          continue;
        }
        if (!known) {
          Damage(block_start + p, Cat("unknown record type ", type));
        } else {
          // At the end of the file: a write cut short, or a damaged length; either way the
          // records after it, if any, tell a tail from a damage before it.
          Damage(block_start + p,
                 last ? "record runs past the end of the file" : "bad record length");
        }
        ++p;
        continue;
      }
      const std::string_view payload(h + header, length);
      if (Crc32c(std::string_view(h + 6, header - 6), payload) != Unmask(DecodeLe32(h))) {
        if (!resyncing) Damage(block_start + p, "checksum mismatch");
        ++p;
        continue;
      }
      if (recyclable && DecodeLe32(h + 7) != static_cast<uint32_t>(scan_->number)) {
        if (!resyncing) return false;  // a record of the log this file was before: the end
        ++p;
        continue;
      }
      resync_ = false;
      Fragment(recyclable ? type - (kRecyclableFullType - kFullType) : type, payload,
               block_start + p);
      p += header + length;
    }
    return true;
  }

  void Fragment(uint8_t type, std::string_view payload, uint64_t offset) {
    switch (type) {
      case kFullType:
        if (in_fragment_) Damage(fragment_offset_, "record without its last fragment");
        in_fragment_ = false;
        Record(payload);
        return;
      case kFirstType:
        if (in_fragment_) Damage(fragment_offset_, "record without its last fragment");
        in_fragment_ = true;
        fragment_offset_ = offset;
        assembled_.assign(payload);
        return;
      case kMiddleType:
      case kLastType:
        if (!in_fragment_) {
          // After a damage, the tail of the damaged record; otherwise a record without its start.
          if (!scan_->damage_offset) Damage(offset, "fragment without its first part");
          return;
        }
        assembled_.append(payload);
        if (type == kLastType) {
          in_fragment_ = false;
          Record(assembled_);
        }
        return;
      default:  // kSetCompressionType: metadata, not a change
        return;
    }
  }

  void Record(std::string_view rep) {
    RawDropped one;
    one.records = 1;
    if (rep.size() < kWriteBatchHeader) {
      one.unparsed = true;
    } else {
      rocksdb::WriteBatch batch{std::string(rep)};
      Tally tally(&one);
      if (!batch.Iterate(&tally).ok()) one.unparsed = true;
    }
    scan_->all.Merge(one);
    if (scan_->damage_offset) scan_->after_damage.Merge(one);
  }

  // The first damage of the file is kept; each one makes the scan look for the next intact
  // record byte by byte (the length field may be what is damaged).
  void Damage(uint64_t offset, std::string reason) {
    if (in_fragment_) offset = std::min(offset, fragment_offset_);  // the record's first part
    if (!scan_->damage_offset) {
      scan_->damage_offset = offset;
      scan_->reason = std::move(reason);
    }
    in_fragment_ = false;
    assembled_.clear();
    resync_ = true;
  }

  LogScan* scan_;
  bool resync_ = false;
  bool in_fragment_ = false;
  uint64_t fragment_offset_ = 0;
  std::string assembled_;
};

StatusOr<LogScan> ScanLog(rocksdb::Env* env, const std::string& file, uint64_t number) {
  LogScan scan;
  scan.file = file;
  scan.number = number;
  RETURN_IF_ERROR(FromRocks(env->GetFileSize(file, &scan.size), Cat("sizing ", file)));
  LogScanner scanner(&scan);
  RETURN_IF_ERROR(scanner.Run(env));
  return scan;
}

// "000012.log" -> 12.
std::optional<uint64_t> LogNumber(std::string_view name) {
  constexpr std::string_view kSuffix = ".log";
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return std::nullopt;
  name.remove_suffix(kSuffix.size());
  if (name.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Learns, from a read-only open that stops before replaying anything, which logs RocksDB will
// replay (those at or above the smallest log number a column family still needs) and the column
// families' ids.
class LiveLogs : public rocksdb::WalFilter {
 public:
  void ColumnFamilyLogNumberMap(const std::map<uint32_t, uint64_t>& cf_lognumber_map,
                                const std::map<std::string, uint32_t>& cf_name_id_map) override {
    called = true;
    bool first = true;
    for (const auto& [cf, log] : cf_lognumber_map) {
      min_log = first ? log : std::min(min_log, log);
      first = false;
    }
    log_of = cf_lognumber_map;
    for (const auto& [name, id] : cf_name_id_map) names[id] = name;
  }
  WalProcessingOption LogRecordFound(unsigned long long, const std::string&,
                                     const rocksdb::WriteBatch&, rocksdb::WriteBatch*,
                                     bool*) override {
    return WalProcessingOption::kStopReplay;
  }
  const char* Name() const override { return "ripplekv.LiveLogs"; }

  // The families whose data (table files) was flushed from a log after `log`: RocksDB refuses a
  // point-in-time recovery that stops in `log` when there is one (db_impl_open.cc, "SST file is
  // ahead of WALs").
  std::vector<std::string> FlushedPast(uint64_t log) const {
    std::vector<std::string> out;
    for (const auto& [cf, number] : log_of) {
      auto bytes = sst_bytes.find(cf);
      if (number > log && bytes != sst_bytes.end() && bytes->second > 0) {
        auto name = names.find(cf);
        out.push_back(name == names.end() ? Cat("cf", cf) : name->second);
      }
    }
    return out;
  }

  bool called = false;
  uint64_t min_log = 0;
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, uint64_t> log_of;     // column family id -> the oldest log it needs
  std::map<uint32_t, uint64_t> sst_bytes;  // column family id -> bytes of its table files
};

// A logger for that open: it must not rotate the database's LOG.
class SilentLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

Status LearnLiveLogs(rocksdb::Env* env, const std::string& db_path, LiveLogs* live) {
  rocksdb::DBOptions options;
  options.env = env;
  options.wal_filter = live;
  options.info_log = std::make_shared<SilentLogger>();
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords;
  std::vector<std::string> names;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::ListColumnFamilies(options, db_path, &names),
                            Cat("reading the database")));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(options, db_path, descriptors, &handles, &raw);
  if (raw != nullptr) {
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      uint64_t bytes = 0;
      if (raw->GetIntProperty(h, rocksdb::DB::Properties::kLiveSstFilesSize, &bytes)) {
        live->sst_bytes[h->GetID()] = bytes;
      }
      raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    delete raw;
  }
  if (!live->called && !s.ok()) return FromRocks(s, "reading the database");
  return absl::OkStatus();
}

std::string Plural(uint64_t n, std::string_view one, std::string_view many) {
  return Cat(n, " ", n == 1 ? one : many);
}

DroppedWrites Name(const RawDropped& raw, const std::map<uint32_t, std::string>& names) {
  auto name = [&](uint32_t id) {
    auto it = names.find(id);
    return it == names.end() ? Cat("cf", id) : it->second;
  };
  DroppedWrites out;
  out.records = raw.records;
  for (const auto& [cf, n] : raw.writes) out.writes_per_family[name(cf)] += n;
  for (const auto& [cf, v] : raw.max_prefix) {
    uint64_t& max = out.max_id_prefix[name(cf)];
    max = std::max(max, v);
  }
  out.max_next_job_id = raw.max_next_job_id;
  out.max_next_rollout_id = raw.max_next_rollout_id;
  out.unparsed = raw.unparsed;
  return out;
}

// "3 records (jobs x2, tasks x8, meta x2)" and the ids in them.
std::string Describe(const DroppedWrites& d) {
  std::string out = Plural(d.records, "intact record", "intact records");
  if (!d.writes_per_family.empty()) {
    out += " (";
    bool first = true;
    for (const auto& [cf, n] : d.writes_per_family) {
      out += Cat(first ? "" : ", ", cf, " x", n);
      first = false;
    }
    out += ")";
  }
  if (auto it = d.max_id_prefix.find(std::string(kJobsCf)); it != d.max_id_prefix.end()) {
    out += Cat("; job ids up to ", it->second);
  }
  if (auto it = d.max_id_prefix.find(std::string(kRolloutsCf)); it != d.max_id_prefix.end()) {
    out += Cat("; rollout ids up to ", it->second);
  }
  if (d.unparsed) out += "; some records did not parse as write batches";
  return out;
}

}  // namespace

StatusOr<std::optional<WalDamage>> CheckLogFile(rocksdb::Env* env, const std::string& file) {
  const size_t slash = file.find_last_of('/');
  const std::optional<uint64_t> number =
      LogNumber(slash == std::string::npos ? file : file.substr(slash + 1));
  ASSIGN_OR_RETURN(LogScan scan, ScanLog(env, file, number.value_or(0)));
  if (!scan.damage_offset) return std::optional<WalDamage>();
  WalDamage damage{.file = file,
                   .offset = *scan.damage_offset,
                   .reason = scan.reason,
                   .bytes_dropped = scan.size - *scan.damage_offset,
                   .dropped = Name(scan.after_damage, {})};
  return std::optional<WalDamage>(std::move(damage));
}

StatusOr<WalCheck> CheckWal(rocksdb::Env* env, const std::string& db_path, bool accept_loss) {
  std::vector<std::string> children;
  RETURN_IF_ERROR(FromRocks(env->GetChildren(db_path, &children), Cat("listing ", db_path)));
  std::vector<std::pair<uint64_t, std::string>> logs;
  for (const std::string& name : children) {
    if (std::optional<uint64_t> number = LogNumber(name)) {
      logs.emplace_back(*number, Cat(db_path, "/", name));
    }
  }
  std::sort(logs.begin(), logs.end());
  std::vector<LogScan> scans;
  bool damaged = false;
  for (const auto& [number, file] : logs) {
    ASSIGN_OR_RETURN(LogScan scan, ScanLog(env, file, number));
    damaged = damaged || scan.damage_offset.has_value();
    scans.push_back(std::move(scan));
  }
  WalCheck check;
  if (!damaged) return check;

  // Logs below the smallest one a column family needs are obsolete (flushed; RocksDB skips and
  // deletes them): their damage loses nothing.
  LiveLogs live;
  RETURN_IF_ERROR(LearnLiveLogs(env, db_path, &live));
  auto first_live = std::find_if(scans.begin(), scans.end(),
                                 [&](const LogScan& s) { return s.number >= live.min_log; });
  auto damaged_log = std::find_if(first_live, scans.end(),
                                  [](const LogScan& s) { return s.damage_offset.has_value(); });
  if (damaged_log == scans.end()) return check;

  RawDropped raw = damaged_log->after_damage;
  uint64_t bytes = damaged_log->size - *damaged_log->damage_offset;
  uint64_t later = 0;
  for (auto it = std::next(damaged_log); it != scans.end(); ++it) {
    raw.Merge(it->all);
    bytes += it->size;
    ++later;
  }
  WalDamage damage{.file = damaged_log->file,
                   .offset = *damaged_log->damage_offset,
                   .reason = damaged_log->reason,
                   .bytes_dropped = bytes,
                   .later_logs = later,
                   .dropped = Name(raw, live.names)};
  const std::string where = Cat("write-ahead log ", damage.file, " is damaged at offset ",
                                damage.offset, " (", damage.reason, ")");
  const std::string extent =
      Cat(damage.bytes_dropped, " bytes from there to the end of the log",
          later == 0 ? std::string() : Cat(" and ", Plural(later, "later log", "later logs")));
  // Some family flushed past the damaged log: no point in time before the damage exists.
  std::string no_point_in_time;
  if (const std::vector<std::string> past = live.FlushedPast(damaged_log->number); !past.empty()) {
    no_point_in_time = Cat("column famil", past.size() == 1 ? "y '" : "ies '", past[0], "'");
    for (size_t i = 1; i < past.size(); ++i) no_point_in_time += Cat(", '", past[i], "'");
    no_point_in_time += Cat(past.size() == 1 ? " holds" : " hold",
                            " table data flushed from a later log, so the database has no "
                            "consistent state before the damage");
  }
  if (!damage.tail() && !no_point_in_time.empty()) {
    return absl::DataLossError(
        Cat(where, " and intact records follow it: ", extent, " hold ", Describe(damage.dropped),
            ". The loss cannot ", accept_loss ? "be accepted" : "be accepted either", ": ",
            no_point_in_time, ". Restore from a checkpoint (docs/OPERATIONS.md, \"Corruption\")"));
  }
  if (damage.tail()) {
    check.notes.push_back(Cat(where,
                              ": a torn last record (no intact record after it, the write "
                              "a crash cut short); point-in-time recovery dropped ",
                              extent));
  } else if (!accept_loss) {
    return absl::DataLossError(
        Cat(where, " and intact records follow it: opening would drop ", extent, ", holding ",
            Describe(damage.dropped),
            ". Those changes were acknowledged. Restore from a checkpoint, or accept the loss "
            "(StoreOptions::accept_wal_loss; ripplekv-scheduler --accept-wal-loss) to open the "
            "database as it was before the damage (docs/OPERATIONS.md, \"Corruption\")"));
  } else {
    check.notes.push_back(Cat(where,
                              "; the loss was accepted (accept_wal_loss): point-in-time "
                              "recovery dropped ",
                              extent, ", holding ", Describe(damage.dropped)));
  }
  check.damage = std::move(damage);
  return check;
}

}  // namespace ripplekv::store
