// Damaged files on a real database: corruption is never silent (docs/STORE.md, "Corruption").
// A torn last record of the write-ahead log is dropped and noted; damage with intact records after
// it is DataLoss naming the log and offset, unless the loss is accepted, which opens up to the
// damage, notes what was dropped and hands out no id twice; a damaged table file or MANIFEST is
// DataLoss naming it.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/strings.h"
#include "rocksdb/env.h"
#include "store/keys.h"
#include "store/store.h"
#include "store/wal_check.h"
#include "tests/store/rollout_samples.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::TempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

namespace fs = std::filesystem;

const std::vector<PlannedTask> kTasks = {{.sample = 0, .layer = 0}, {.sample = 0, .layer = 1}};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::string bytes = ReadFile(path);
  ASSERT_LT(offset, bytes.size()) << path;
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5a);
  WriteFile(path, bytes);
}

// The database's files whose names end with `suffix` (or start with it, for "MANIFEST-"), sorted.
std::vector<std::string> Files(const std::string& db, const std::string& pattern) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(db)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(pattern) || name.starts_with(pattern)) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The newest write-ahead log (the one the store appends to).
std::string NewestLog(const std::string& db) {
  std::vector<std::string> logs = Files(db, ".log");
  EXPECT_FALSE(logs.empty());
  return logs.empty() ? std::string() : logs.back();
}

// Opens a store with synced writes, creates `jobs` jobs (ids 1..jobs), and records where each
// job's record ends in the newest log: ends[i] is the log's size after job i + 1 (ends[-1], the
// size before the first, is `start`). Each CreateJob is one record. Closes the store.
struct Written {
  std::string log;
  uint64_t start = 0;
  std::vector<uint64_t> ends;
};

Written CreateJobs(const std::string& db, int jobs, size_t inline_bytes = 0) {
  Written out;
  StatusOr<std::unique_ptr<Store>> store = OpenStore(db, StoreOptions{.sync_writes = true});
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return out;
  out.log = NewestLog(db);
  out.start = fs::file_size(out.log);
  for (int i = 0; i < jobs; ++i) {
    JobSpec spec = MakeSpec();
    spec.data_inline = std::string(inline_bytes, static_cast<char>('a' + i));
    StatusOr<CreateJobOutcome> created = (*store)->CreateJob(spec, kTasks);
    EXPECT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->job.id, static_cast<JobId>(i + 1));
    EXPECT_EQ(NewestLog(db), out.log) << "the store switched logs; the offsets below assume one";
    out.ends.push_back(fs::file_size(out.log));
  }
  return out;
}

std::vector<JobId> JobIds(Store& store) {
  StatusOr<std::vector<Job>> jobs = store.ListJobs({});
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  std::vector<JobId> ids;
  if (jobs.ok()) {
    for (const Job& job : *jobs) ids.push_back(job.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(StoreWalCorruptionTest, CleanOpenHasNoNotes) {
  TempDir dir;
  CreateJobs(dir.db(), 3);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->RecoveryNotes(), IsEmpty());
  EXPECT_THAT(JobIds(**store), ElementsAre(1, 2, 3));
}

TEST(StoreWalCorruptionTest, FlippedByteInTheLastRecordIsATornTailDroppedAndNoted) {
  TempDir dir;
  const Written w = CreateJobs(dir.db(), 4);
  ASSERT_EQ(w.ends.size(), 4u);
  const uint64_t last_start = w.ends[2];
  FlipByte(w.log, w.ends[3] - 3);  // inside job 4's record, the last one
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT(JobIds(**store), ElementsAre(1, 2, 3));  // only the damaged record is gone
  ASSERT_THAT((*store)->RecoveryNotes(), SizeIs(1));
  EXPECT_THAT((*store)->RecoveryNotes()[0],
              AllOf(HasSubstr(Cat("write-ahead log ", w.log, " is damaged at offset ", last_start,
                                  " (checksum mismatch)")),
                    HasSubstr("torn last record"),
                    HasSubstr(Cat("dropped ", w.ends[3] - last_start, " bytes"))));
}

TEST(StoreWalCorruptionTest, TruncatedLastRecordIsATornTailDroppedAndNoted) {
  TempDir dir;
  const Written w = CreateJobs(dir.db(), 3);
  ASSERT_EQ(w.ends.size(), 3u);
  fs::resize_file(w.log, w.ends[2] - 10);  // a power cut in the middle of job 3's write
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT(JobIds(**store), ElementsAre(1, 2));
  ASSERT_THAT((*store)->RecoveryNotes(), SizeIs(1));
  EXPECT_THAT((*store)->RecoveryNotes()[0],
              AllOf(HasSubstr(Cat("offset ", w.ends[1], " (record runs past the end of the file)")),
                    HasSubstr("torn last record")));
  // The job that was never acknowledged gives its id to the next one; nothing is noted again.
  store->reset();
  store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->RecoveryNotes(), IsEmpty());
}

TEST(StoreWalCorruptionTest, DamageBeforeTheTailIsDataLossNamingFileAndOffset) {
  TempDir dir;
  const Written w = CreateJobs(dir.db(), 5);
  ASSERT_EQ(w.ends.size(), 5u);
  FlipByte(w.log, w.ends[1] - 3);  // inside job 2's record; jobs 3, 4, 5 follow intact
  const std::string before = ReadFile(w.log);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  const std::string message(store.status().message());
  EXPECT_THAT(message, HasSubstr(Cat("write-ahead log ", w.log, " is damaged at offset ", w.ends[0],
                                     " (checksum mismatch)")));
  EXPECT_THAT(message, HasSubstr("3 intact records"));
  EXPECT_THAT(message, HasSubstr("job ids up to 5"));
  EXPECT_THAT(message, HasSubstr(Cat(w.ends[4] - w.ends[0], " bytes")));
  EXPECT_THAT(message, HasSubstr("accept_wal_loss"));
  // The refusal changed nothing: the same open refuses the same way.
  EXPECT_EQ(ReadFile(w.log), before);
  store = OpenStore(dir.db(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
}

TEST(StoreWalCorruptionTest, AcceptedLossOpensNotesWhatWasDroppedAndReusesNoId) {
  TempDir dir;
  const Written w = CreateJobs(dir.db(), 5);
  ASSERT_EQ(w.ends.size(), 5u);
  FlipByte(w.log, w.ends[1] - 3);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {.accept_wal_loss = true});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT(JobIds(**store), ElementsAre(1));  // point in time: the damage and all after it
  const std::vector<std::string> notes = (*store)->RecoveryNotes();
  ASSERT_THAT(notes, SizeIs(2));
  EXPECT_THAT(
      notes[0],
      AllOf(HasSubstr(Cat("write-ahead log ", w.log, " is damaged at offset ", w.ends[0])),
            HasSubstr("the loss was accepted"),
            HasSubstr(Cat("dropped ", w.ends[4] - w.ends[0], " bytes")),
            HasSubstr("3 intact records"), HasSubstr("jobs x3"), HasSubstr("job ids up to 5")));
  EXPECT_THAT(notes[1], HasSubstr("the next job id was raised from 2 to 6"));
  // Ids 2..5 were acknowledged to clients before the damage: none is given again.
  StatusOr<CreateJobOutcome> created = (*store)->CreateJob(MakeSpec(), kTasks);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->job.id, 6u);
  // The next open is clean: the damaged log was replaced.
  store->reset();
  store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->RecoveryNotes(), IsEmpty());
  EXPECT_THAT(JobIds(**store), ElementsAre(1, 6));
}

TEST(StoreWalCorruptionTest, DamageInARecordSpanningBlocksIsFoundWithTheRecordsAfterIt) {
  TempDir dir;
  // 40 KB of inline data: each job's record spans two or three 32 KiB blocks.
  const Written w = CreateJobs(dir.db(), 4, 40'000);
  ASSERT_EQ(w.ends.size(), 4u);
  FlipByte(w.log, w.ends[0] + 100);  // the first fragment of job 2's record
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              AllOf(HasSubstr(Cat("damaged at offset ", w.ends[0], " (checksum mismatch)")),
                    HasSubstr("2 intact records"), HasSubstr("job ids up to 4")));
}

TEST(StoreWalCorruptionTest, DamageInAnOlderLogCountsTheLaterLogs) {
  TempDir dir;
  std::string old_log;
  uint64_t job1_start = 0, job1_end = 0;
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {.sync_writes = false});
    ASSERT_TRUE(store.ok()) << store.status();
    old_log = NewestLog(dir.db());
    job1_start = fs::file_size(old_log);
    ASSERT_TRUE((*store)->CreateJob(MakeSpec(), kTasks).ok());
    job1_end = fs::file_size(old_log);
    // Every 256 jobs that become final the store flushes the active-job index alone: the log
    // switches, and the old one stays live for the other column families.
    for (int i = 0; i < 256; ++i) {
      StatusOr<CreateJobOutcome> job = (*store)->CreateJob(MakeSpec(), kTasks);
      ASSERT_TRUE(job.ok()) << job.status();
      ASSERT_TRUE((*store)->UpdateJobState(job->job.id, JobState::kCancelled).ok());
    }
    ASSERT_NE(NewestLog(dir.db()), old_log);
    ASSERT_TRUE((*store)->CreateJob(MakeSpec(), kTasks).ok());  // job 258, in the new log
  }
  FlipByte(old_log, job1_end - 3);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(
      std::string(store.status().message()),
      AllOf(HasSubstr(Cat("write-ahead log ", old_log, " is damaged at offset ", job1_start)),
            HasSubstr("and 1 later log hold"), HasSubstr("job ids up to 258"),
            HasSubstr("The loss cannot be accepted either: column family 'active_jobs' holds "
                      "table data flushed from a later log")));
  // Accepting the loss cannot give a point in time here: the active-job index was flushed from
  // the later log (RocksDB itself would refuse: "SST file is ahead of WALs").
  store = OpenStore(dir.db(), {.accept_wal_loss = true});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              AllOf(HasSubstr("The loss cannot be accepted: column family 'active_jobs'"),
                    HasSubstr("Restore from a checkpoint")));
}

TEST(StoreWalCorruptionTest, CheckLogFileReportsTheFirstDamageAndWhatFollows) {
  TempDir dir;
  const Written w = CreateJobs(dir.db(), 3);
  ASSERT_EQ(w.ends.size(), 3u);
  StatusOr<std::optional<WalDamage>> clean = CheckLogFile(rocksdb::Env::Default(), w.log);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_FALSE(clean->has_value());
  // A damaged length field: the scan resynchronizes on the next intact record.
  FlipByte(w.log, w.ends[0] + 5);
  StatusOr<std::optional<WalDamage>> damaged = CheckLogFile(rocksdb::Env::Default(), w.log);
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  ASSERT_TRUE(damaged->has_value());
  EXPECT_EQ((*damaged)->offset, w.ends[0]);
  EXPECT_EQ((*damaged)->dropped.records, 1u);
  EXPECT_FALSE((*damaged)->tail());
}

TEST(StoreWalCorruptionTest, CountersBelowTheStoredIdsAreRaised) {
  TempDir dir;
  CreateJobs(dir.db(), 3);
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->CreateRollout(testing::SampleRollout()).ok());
    ASSERT_TRUE((*store)->CreateRollout(testing::SampleRollout()).ok());
  }
  // Counters that fell behind the data (as a lost counter write would leave them).
  ASSERT_TRUE(
      testing::PutRaw(dir.db(), kMetaCf, kNextJobIdKey, std::string("\0\0\0\0\0\0\0\2", 8)));
  ASSERT_TRUE(
      testing::PutRaw(dir.db(), kMetaCf, kNextRolloutIdKey, std::string("\0\0\0\0\0\0\0\1", 8)));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->RecoveryNotes(),
              ElementsAre(HasSubstr("the next job id was raised from 2 to 4"),
                          HasSubstr("the next rollout id was raised from 1 to 3")));
  StatusOr<CreateJobOutcome> job = (*store)->CreateJob(MakeSpec(), kTasks);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job.id, 4u);
  StatusOr<RolloutRecord> rollout = (*store)->CreateRollout(testing::SampleRollout());
  ASSERT_TRUE(rollout.ok()) << rollout.status();
  EXPECT_EQ(rollout->id, 3u);
}

// Writes jobs, then reopens so that recovery flushes them into table files.
void CreateFlushedJobs(const std::string& db) {
  CreateJobs(db, 3);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(db, {});
  ASSERT_TRUE(store.ok()) << store.status();
}

TEST(StoreWalCorruptionTest, FlippedByteInATableFileIsDataLossNamingTheFile) {
  TempDir dir;
  CreateFlushedJobs(dir.db());
  const std::vector<std::string> tables = Files(dir.db(), ".sst");
  ASSERT_FALSE(tables.empty());
  for (const std::string& table : tables) FlipByte(table, 20);  // in the first data block
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(".sst"));
}

TEST(StoreWalCorruptionTest, FlippedByteInATableBlockTheOpenDoesNotReadIsDataLossAtTheFirstRead) {
  TempDir dir;
  // Inline data of pseudo-random letters: it stays recognizable in the table file (compression
  // finds nothing to shorten), in job_data, which the open does not read.
  std::string data(8192, 'a');
  uint32_t x = 12345;
  for (char& c : data) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>('a' + (x >> 16) % 26);
  }
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    JobSpec spec = MakeSpec();
    spec.data_inline = data;
    ASSERT_TRUE((*store)->CreateJob(spec, kTasks).ok());
  }
  {
    StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});  // recovery flushes
    ASSERT_TRUE(store.ok()) << store.status();
  }
  const std::string needle = data.substr(4000, 32);
  std::string damaged;
  for (const std::string& table : Files(dir.db(), ".sst")) {
    const size_t at = ReadFile(table).find(needle);
    if (at == std::string::npos) continue;
    FlipByte(table, at + 16);
    damaged = table;
  }
  ASSERT_FALSE(damaged.empty()) << "no table file holds the inline data";
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_TRUE(store.ok()) << store.status();  // the open reads no job data
  const Status read = (*store)->GetJob(1).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss) << read;
  EXPECT_THAT(std::string(read.message()),
              AllOf(HasSubstr("column family 'job_data', key job=1"), HasSubstr(damaged)));
}

TEST(StoreWalCorruptionTest, FlippedByteInTheManifestIsDataLossNamingTheFile) {
  TempDir dir;
  CreateFlushedJobs(dir.db());
  const std::vector<std::string> manifests = Files(dir.db(), "MANIFEST-");
  ASSERT_THAT(manifests, SizeIs(1));
  FlipByte(manifests[0], fs::file_size(manifests[0]) / 2);
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), {});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("MANIFEST-"));
}

}  // namespace
}  // namespace ripplekv::store
