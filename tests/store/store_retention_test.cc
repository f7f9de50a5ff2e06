// Bounded reads and retention: the active-job index, GetJobMeta, PurgeFinishedJobs (contract and
// disk space) and the migration of schema-version-1 and -2 databases.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/strings.h"
#include "rocksdb/db.h"
#include "store/keys.h"
#include "store/store.h"
#include "tests/store/rollout_samples.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::GetRaw;
using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::PutRaw;
using ::ripplekv::store::testing::SampleRollout;
using ::ripplekv::store::testing::StoreFixture;
using ::ripplekv::store::testing::TempDir;
using ::ripplekv::store::testing::Trials;
using ::testing::HasSubstr;

std::vector<JobId> Ids(const std::vector<Job>& jobs) {
  std::vector<JobId> ids;
  for (const Job& job : jobs) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Bytes of every file in the database directory (SST, WAL, MANIFEST, LOG, ...).
uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

class RetentionTest : public StoreFixture {
 protected:
  RetentionTest() { now_ = 5'000; }

  // A job of `layers` tasks (1 sample) with `data` inline, run to succeeded (with a profile) or
  // left running.
  JobId RunJob(uint32_t layers, const std::string& data, bool finish, std::string key = {}) {
    JobSpec spec = MakeSpec("feed", /*trials=*/4);
    spec.data_inline = data;
    spec.idempotency_key = std::move(key);
    std::vector<PlannedTask> tasks;
    for (uint32_t l = 0; l < layers; ++l) tasks.push_back({.sample = 0, .layer = l});
    StatusOr<CreateJobOutcome> created = store_->CreateJob(spec, tasks);
    EXPECT_TRUE(created.ok()) << created.status();
    const JobId id = created->job.id;
    for (uint32_t l = 0; l < layers; ++l) {
      const TaskKey key{.job = id, .sample = 0, .layer = l};
      EXPECT_TRUE(store_->LeaseTask(key, "w", now_ + 1000).ok());
      EXPECT_TRUE(store_->CompleteTask(key, Trials(key, 0, 4)).ok());
    }
    if (finish) {
      EXPECT_TRUE(store_->PutProfileVersion("feed", "{\"p\":1}", id).ok());
    }
    return id;
  }
};

TEST_F(RetentionTest, ActiveIndexFollowsEveryStateChangeAndSurvivesReopen) {
  const JobId succeeded = RunJob(2, "x", /*finish=*/true);
  const JobId running = RunJob(2, "y", /*finish=*/false);
  const JobId pending = store_->CreateJob(MakeSpec(), {{PlannedTask{}}})->job.id;
  const JobId cancelled = store_->CreateJob(MakeSpec(), {{PlannedTask{}}})->job.id;
  ASSERT_TRUE(store_->UpdateJobState(cancelled, JobState::kCancelled).ok());
  const JobId failed = RunJob(1, "", /*finish=*/false);
  ASSERT_TRUE(store_->UpdateJobState(failed, JobState::kFailed, "boom").ok());
  for (int reopen = 0; reopen < 2; ++reopen) {
    StatusOr<std::vector<Job>> active = store_->ListJobs({.active_only = true});
    ASSERT_TRUE(active.ok()) << active.status();
    EXPECT_EQ(Ids(*active), (std::vector<JobId>{running, pending}));
    for (const Job& job : *active) EXPECT_TRUE(job.spec.data_inline.empty());
    EXPECT_EQ(store_->ListJobs()->size(), 5u);
    Reopen();
  }
  (void)succeeded;
}

TEST_F(RetentionTest, GetJobMetaLeavesTheInlineDataUnread) {
  const JobId id = RunJob(1, std::string(100'000, 'q'), /*finish=*/false);
  StatusOr<Job> meta = store_->GetJobMeta(id);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_TRUE(meta->spec.data_inline.empty());
  StatusOr<Job> full = store_->GetJob(id);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->spec.data_inline.size(), 100'000u);
  EXPECT_EQ(meta->data_inline_bytes, 100'000u) << "the size is known without the data";
  EXPECT_EQ(store_->ListJobs()->at(0).data_inline_bytes, 100'000u);
  full->spec.data_inline.clear();
  EXPECT_EQ(*meta, *full);
  EXPECT_TRUE(absl::IsNotFound(store_->GetJobMeta(id + 1).status()));
}

TEST_F(RetentionTest, PurgeKeepsTheRecordDeletesTheBulkAndNamesThePurgeInErrors) {
  const JobId old_job = RunJob(3, "old data", /*finish=*/true, "key-1");
  now_ = 6'000;
  const JobId cancelled = RunJob(1, "c", /*finish=*/false);
  ASSERT_TRUE(store_->UpdateJobState(cancelled, JobState::kCancelled).ok());
  const JobId running = RunJob(2, "r", /*finish=*/false);
  now_ = 10'000;
  const JobId recent = RunJob(1, "new", /*finish=*/true);
  const Job before = *store_->GetJobMeta(old_job);

  EXPECT_TRUE(absl::IsInvalidArgument(store_->PurgeFinishedJobs(7'000, 0).status()));
  StatusOr<PurgeOutcome> first = store_->PurgeFinishedJobs(/*finished_before_ms=*/7'000, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->purged, 1u);
  EXPECT_TRUE(first->more);
  StatusOr<PurgeOutcome> second = store_->PurgeFinishedJobs(7'000, 10);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->purged, 1u);  // the cancelled one; `recent` finished after the cutoff
  EXPECT_FALSE(second->more);
  EXPECT_EQ(store_->PurgeFinishedJobs(7'000, 10)->purged, 0u);

  Reopen();
  StatusOr<Job> purged = store_->GetJob(old_job);
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(purged->purged_at_ms, 10'000);
  EXPECT_TRUE(purged->spec.data_inline.empty());
  Job expected = before;
  expected.purged_at_ms = 10'000;
  EXPECT_EQ(*purged, expected);  // state, counters, profile version, spec without data
  EXPECT_EQ(purged->state, JobState::kSucceeded);
  EXPECT_EQ(purged->results_stored, 12u);

  const Status listed = store_->ListResults(old_job).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(listed)) << listed;
  EXPECT_THAT(std::string(listed.message()), HasSubstr(Cat("job ", old_job, " was purged at")));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ListTasks(old_job).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->CountResults(old_job).status()));
  const TaskKey task{.job = old_job, .sample = 0, .layer = 0};
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->GetTask(task).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ListTaskResults(task).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->LeaseTask(task, "w", 1).status()));

  // Profiles stay; the others are untouched; the idempotency key is free again.
  EXPECT_EQ(store_->ListProfiles("feed")->size(), 2u);
  EXPECT_EQ(store_->ListResults(running)->size(), 8u);
  EXPECT_EQ(store_->ListResults(recent)->size(), 4u);
  EXPECT_EQ(store_->GetJob(recent)->spec.data_inline, "new");
  EXPECT_EQ(store_->GetJobMeta(cancelled)->purged_at_ms, 10'000);
  EXPECT_EQ(store_->ListJobs()->size(), 4u);
  EXPECT_EQ(Ids(*store_->ListJobs({.active_only = true})), std::vector<JobId>{running});
  JobSpec again = MakeSpec("feed", 4);
  again.idempotency_key = "key-1";
  StatusOr<CreateJobOutcome> resubmitted = store_->CreateJob(again, {{PlannedTask{}}});
  ASSERT_TRUE(resubmitted.ok()) << resubmitted.status();
  EXPECT_TRUE(resubmitted->created);
  EXPECT_NE(resubmitted->job.id, old_job);
}

// 2,000 finished jobs with 64 KiB of inline data and 8 tasks x 4 trials each; purging them all
// must return most of the disk.
TEST_F(RetentionTest, PurgingFinishedJobsShrinksTheDatabase) {
  constexpr int kJobs = 2000;
  std::mt19937_64 rng(7);
  std::string data(64 << 10, ' ');
  for (int i = 0; i < kJobs; ++i) {
    // Random letters: compressed about as well as real calibration text is, not to nothing.
    for (char& c : data) c = static_cast<char>('a' + rng() % 26);
    RunJob(8, data, /*finish=*/true);
  }
  const JobId kept = RunJob(2, "kept", /*finish=*/false);
  Reopen();  // flushes the WAL into SST files: "before" is what the data occupies at rest
  const uint64_t before = DirectoryBytes(dir_.db());
  now_ += 1;
  uint64_t purged = 0;
  for (bool more = true; more;) {
    StatusOr<PurgeOutcome> outcome = store_->PurgeFinishedJobs(now_, 500);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    purged += outcome->purged;
    more = outcome->more;
  }
  EXPECT_EQ(purged, static_cast<uint64_t>(kJobs));
  const uint64_t after = DirectoryBytes(dir_.db());
  std::printf("database: %.1f MiB before the purge, %.1f MiB after (%.1f%%)\n", before / 1048576.0,
              after / 1048576.0, 100.0 * after / before);
  EXPECT_LT(after, before / 10) << before << " bytes before, " << after << " after";
  EXPECT_EQ(store_->ListResults(kept)->size(), 8u);
  EXPECT_EQ(store_->ListJobs()->size(), static_cast<size_t>(kJobs + 1));
}

// An empty RocksDB database with the column families `names` (and "default").
void CreateFamilies(const std::string& path, const std::vector<std::string_view>& names) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (std::string_view name : names) {
    families.emplace_back(std::string(name), rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, families, &handles, &db).ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  delete db;
}

// An empty RocksDB database with the column families of schema version 1.
void CreateVersionOneFamilies(const std::string& path) {
  CreateFamilies(path, {kJobsCf, kTasksCf, kResultsCf, kProfilesCf, kBudgetMapsCf, kMetaCf});
}

// An empty RocksDB database with the column families of schema version 2.
void CreateVersionTwoFamilies(const std::string& path) {
  CreateFamilies(path, {kJobsCf, kTasksCf, kResultsCf, kProfilesCf, kBudgetMapsCf, kMetaCf,
                        kJobDataCf, kActiveJobsCf, kFinishedJobsCf});
}

// A budget map record as schema versions 1 and 2 wrote it: no digest.
std::string OldBudgetMap(uint32_t profile_version, std::string_view budget_json) {
  return Cat(R"({"v":1,"profile_version":)", profile_version, R"(,"budget_json":")", budget_json,
             R"(","created_at_ms":7})");
}

// A database in the schema-version-1 layout, written by hand: inline data under job id + 'd' in
// the jobs column family, no job indexes.
TEST(StoreMigrationTest, SchemaVersionOneIsMigratedInPlaceOnOpen) {
  TempDir dir;
  const StoreOptions options{.sync_writes = false};
  CreateVersionOneFamilies(dir.db());
  const std::string spec =
      R"({"model_path":"m","model_hash":"ab","data_path":"","params":{"mode":"cache",)"
      R"("alpha":0.5,"trials":1,"seed":0,"samples":1,"context_len":8,"probe_len":2,)"
      R"("layers":[]},"priority":0,"idempotency_key":""})";
  auto record = [&](std::string_view state, int64_t updated) {
    return Cat(R"({"v":1,"spec":)", spec, R"(,"state":")", state,
               R"(","created_at_ms":1,"updated_at_ms":)", updated,
               R"(,"tasks_total":1,"tasks_done":0,"results_stored":0,"duplicate_results":0,)"
               R"("conflicting_results":0,"profile_version":0,"error":""})");
  };
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, JobKey(1), record("running", 10)));
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, V1JobDataKey(1), R"({"v":1,"data_inline":"one"})"));
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, JobKey(2), record("cancelled", 20)));
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, V1JobDataKey(2), R"({"v":1,"data_inline":"two"})"));
  ASSERT_TRUE(PutRaw(dir.db(), kTasksCf, TaskKeyBytes({.job = 1}),
                     R"({"v":1,"state":"leased","lease_owner":"w","lease_deadline_ms":5,)"
                     R"("attempts":1})"));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 1), OldBudgetMap(1, "{}")));
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, kSchemaVersionKey, "1"));

  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->RecoveredLeases(), 1u);  // found through the new active index
  // On through version 2 to 3: the budget map has its digest and is in the index.
  EXPECT_EQ((*store)->GetBudgetMapByDigest("ab", "44136fa355b3678a")->version, 1u);
  EXPECT_EQ((*store)->GetJob(1)->spec.data_inline, "one");
  EXPECT_EQ((*store)->GetJob(2)->spec.data_inline, "two");
  EXPECT_EQ((*store)->GetJobMeta(1)->data_inline_bytes, 3u) << "the record learns its data's size";
  EXPECT_EQ(Ids(*(*store)->ListJobs({.active_only = true})), std::vector<JobId>{1});
  EXPECT_EQ((*store)->ListJobs()->size(), 2u);  // the old data keys are gone from 'jobs'
  EXPECT_EQ((*store)->PurgeFinishedJobs(21, 10)->purged, 1u);  // finished at its last update
  EXPECT_TRUE((*store)->GetJob(2)->spec.data_inline.empty());
  store->reset();
  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, kSchemaVersionKey), kSchemaVersion);
  store = OpenStore(dir.db(), options);  // the current version now: opens without migrating
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->GetJob(1)->spec.data_inline, "one");
}

// A database in the schema-version-2 layout, written by hand: budget maps without a digest (one
// map stored twice, which version 2 allowed), no digest index, no rollout column families.
TEST(StoreMigrationTest, SchemaVersionTwoIsMigratedInPlaceOnOpen) {
  TempDir dir;
  const StoreOptions options{.sync_writes = false};
  CreateVersionTwoFamilies(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kProfilesCf, VersionKey("ab", 1),
                     R"({"v":1,"profile_json":"{}","job":0,"created_at_ms":3})"));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 1), OldBudgetMap(1, "{}")));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 2), OldBudgetMap(1, "[1]")));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 3), OldBudgetMap(1, "{}")));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("cd", 1), OldBudgetMap(4, "[1]")));
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, kSchemaVersionKey, "2"));

  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  // sha256("{}") and sha256("[1]") begin with these.
  const std::string empty_digest = "44136fa355b3678a";
  const std::string list_digest = "080a9ed428559ef6";
  StatusOr<std::vector<BudgetMapRecord>> maps = (*store)->ListBudgetMaps();
  ASSERT_TRUE(maps.ok()) << maps.status();
  const std::vector<BudgetMapRecord> expected = {
      {.model_hash = "ab",
       .version = 1,
       .profile_version = 1,
       .budget_json = "{}",
       .digest = empty_digest,
       .created_at_ms = 7},
      {.model_hash = "ab",
       .version = 2,
       .profile_version = 1,
       .budget_json = "[1]",
       .digest = list_digest,
       .created_at_ms = 7},
      {.model_hash = "ab",
       .version = 3,
       .profile_version = 1,
       .budget_json = "{}",
       .digest = empty_digest,
       .created_at_ms = 7},
      {.model_hash = "cd",
       .version = 1,
       .profile_version = 4,
       .budget_json = "[1]",
       .digest = list_digest,
       .created_at_ms = 7},
  };
  EXPECT_EQ(*maps, expected);
  // The index names the first of the twice-stored map; storing it again returns that one.
  EXPECT_EQ(*(*store)->GetBudgetMapByDigest("ab", empty_digest), expected[0]);
  EXPECT_EQ(*(*store)->GetBudgetMapByDigest("ab", list_digest), expected[1]);
  EXPECT_EQ(*(*store)->GetBudgetMapByDigest("cd", list_digest), expected[3]);
  StatusOr<BudgetMapPut> again = (*store)->PutBudgetMap("ab", 1, "{}");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->map, expected[0]);
  // The rollout column families exist.
  EXPECT_EQ((*store)->CreateRollout(SampleRollout())->id, 1u);
  store->reset();

  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, kSchemaVersionKey), kSchemaVersion);
  store = OpenStore(dir.db(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->ListBudgetMaps(), expected);
  EXPECT_EQ(*(*store)->GetRollout(1), [] {
    RolloutRecord r = SampleRollout();
    r.id = 1;
    return r;
  }());
}

TEST(StoreMigrationTest, DamagedVersionTwoBudgetMapIsDataLossAndNothingIsMigrated) {
  TempDir dir;
  const StoreOptions options{.sync_writes = false};
  CreateVersionTwoFamilies(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 1), OldBudgetMap(1, "{}")));
  ASSERT_TRUE(PutRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 2),
                     R"({"v":1,"profile_version":1,"created_at_ms":7})"));
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, kSchemaVersionKey, "2"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("column family 'budget_maps', key model_hash=ab version=2: field "
                        "'budget_json' is missing"));
  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, kSchemaVersionKey), "2");
  EXPECT_EQ(GetRaw(dir.db(), kBudgetMapsCf, VersionKey("ab", 1)), OldBudgetMap(1, "{}"));
  EXPECT_EQ(GetRaw(dir.db(), kMetaCf, MapDigestKey("ab", "44136fa355b3678a")), std::nullopt);
}

TEST(StoreMigrationTest, DamagedVersionOneDataIsDataLossAndNothingIsMigrated) {
  TempDir dir;
  const StoreOptions options{.sync_writes = false};
  CreateVersionOneFamilies(dir.db());
  ASSERT_TRUE(PutRaw(dir.db(), kJobsCf, V1JobDataKey(1), R"({"v":1,"data_inline":7})"));
  ASSERT_TRUE(PutRaw(dir.db(), kMetaCf, kSchemaVersionKey, "1"));
  StatusOr<std::unique_ptr<Store>> store = OpenStore(dir.db(), options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("column family 'jobs', key job=1 data"));
}

}  // namespace
}  // namespace ripplekv::store
