// Store::Checkpoint: the copy opens as a store holding what the original held when it was taken,
// stays apart from the original afterwards, is consistent under concurrent writes, is private to
// its owner (0700 directories, 0600 files), and bad directories are refused with their path named.

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::StoreFixture;
using ::ripplekv::store::testing::Trials;
using ::testing::HasSubstr;

std::vector<PlannedTask> Grid(uint32_t samples, uint32_t layers) {
  std::vector<PlannedTask> tasks;
  for (uint32_t s = 0; s < samples; ++s) {
    for (uint32_t l = 0; l < layers; ++l) tasks.push_back({.sample = s, .layer = l});
  }
  return tasks;
}

class StoreCheckpointTest : public StoreFixture {
 protected:
  JobId NewJob(uint32_t samples, uint32_t layers, std::string hash = "00ff") {
    StatusOr<CreateJobOutcome> outcome =
        store_->CreateJob(MakeSpec(std::move(hash)), Grid(samples, layers));
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job.id : kNoJob;
  }
  void Finish(Store& store, const TaskKey& key) {
    ASSERT_TRUE(store.LeaseTask(key, "w", now_ + 1000).ok());
    StatusOr<ResultWriteOutcome> done = store.CompleteTask(key, Trials(key, 0, 2));
    ASSERT_TRUE(done.ok()) << done.status();
  }
  std::unique_ptr<Store> OpenCopy(const std::string& dir) {
    StoreOptions options = options_;
    options.create_if_missing = false;
    StatusOr<std::unique_ptr<Store>> copy = OpenStore(dir, options);
    EXPECT_TRUE(copy.ok()) << copy.status();
    return copy.ok() ? *std::move(copy) : nullptr;
  }
  std::string CheckpointDir() const { return dir_.path() + "/checkpoint"; }
};

TEST_F(StoreCheckpointTest, CopyOpensWithTheSameJobsTasksResultsAndProfiles) {
  const JobId finished = NewJob(1, 2);
  Finish(*store_, {.job = finished, .sample = 0, .layer = 0});
  Finish(*store_, {.job = finished, .sample = 0, .layer = 1});
  ASSERT_TRUE(store_->PutProfileVersion("00ff", R"({"layers":[1,2]})", finished).ok());
  const JobId running = NewJob(2, 3, "11ee");
  Finish(*store_, {.job = running, .sample = 0, .layer = 1});
  Finish(*store_, {.job = running, .sample = 1, .layer = 2});
  ASSERT_TRUE(store_->PutResults(Trials({.job = running, .sample = 1, .layer = 0}, 0, 1)).ok());
  const TaskKey leased{.job = running, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(leased, "w", now_ + 1000).ok());

  StatusOr<CheckpointInfo> info = store_->Checkpoint(CheckpointDir());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->dir, CheckpointDir());
  EXPECT_GT(info->bytes, 0u);
  EXPECT_EQ(info->created_at_ms, now_);
  EXPECT_EQ(info->schema_version, "4");
  EXPECT_TRUE(std::filesystem::exists(CheckpointDir() + "/CURRENT"));

  // Written after the checkpoint: in the original only.
  Finish(*store_, {.job = running, .sample = 0, .layer = 2});
  const JobId later = NewJob(1, 1);

  std::unique_ptr<Store> copy = OpenCopy(CheckpointDir());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->RecoveredLeases(), 1u);  // the lease held at the checkpoint, now pending
  StatusOr<std::vector<Job>> jobs = copy->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_FALSE(copy->GetJob(later).ok());
  for (JobId id : {finished, running}) {
    StatusOr<Job> original = store_->GetJob(id);
    StatusOr<Job> copied = copy->GetJob(id);
    ASSERT_TRUE(original.ok() && copied.ok());
    EXPECT_EQ(copied->state, original->state) << id;
    EXPECT_EQ(copied->spec, original->spec) << id;
    EXPECT_EQ(copied->profile_version, original->profile_version) << id;
  }
  StatusOr<Job> copied_running = copy->GetJob(running);
  ASSERT_TRUE(copied_running.ok());
  EXPECT_EQ(copied_running->tasks_done, 2u);
  EXPECT_EQ(copied_running->state, JobState::kRunning);

  StatusOr<std::vector<TrialResult>> results = copy->ListResults(running);
  ASSERT_TRUE(results.ok()) << results.status();
  std::vector<TrialResult> expected = Trials({.job = running, .sample = 0, .layer = 1}, 0, 2);
  for (const TrialResult& r : Trials({.job = running, .sample = 1, .layer = 0}, 0, 1)) {
    expected.push_back(r);
  }
  for (const TrialResult& r : Trials({.job = running, .sample = 1, .layer = 2}, 0, 2)) {
    expected.push_back(r);
  }
  EXPECT_EQ(*results, expected);
  StatusOr<std::vector<TrialResult>> finished_results = copy->ListResults(finished);
  StatusOr<std::vector<TrialResult>> original_results = store_->ListResults(finished);
  ASSERT_TRUE(finished_results.ok() && original_results.ok());
  EXPECT_EQ(*finished_results, *original_results);

  StatusOr<std::vector<Task>> tasks = copy->ListTasks(running);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 6u);
  EXPECT_EQ((*tasks)[0].key, leased);
  EXPECT_EQ((*tasks)[0].state, TaskState::kPending);
  EXPECT_EQ((*tasks)[0].attempts, 1u);
  EXPECT_EQ((*tasks)[1].state, TaskState::kDone);
  EXPECT_EQ((*tasks)[2].state, TaskState::kPending);  // done in the original after the copy

  StatusOr<ProfileVersion> profile = copy->GetProfile("00ff");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->profile_json, R"({"layers":[1,2]})");
  // The copy takes new writes with its own ids, apart from the original.
  StatusOr<CreateJobOutcome> next = copy->CreateJob(MakeSpec(), Grid(1, 1));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->job.id, later);
}

// Even under a permissive umask the copy is 0700 / 0600: it holds every job, token hash and
// result of the database.
TEST_F(StoreCheckpointTest, CopyIsPrivateToItsOwner) {
  NewJob(2, 2);
  const mode_t old_umask = ::umask(022);
  StatusOr<CheckpointInfo> info = store_->Checkpoint(CheckpointDir());
  ::umask(old_umask);
  ASSERT_TRUE(info.ok()) << info.status();
  struct stat st {};
  ASSERT_EQ(::stat(CheckpointDir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(CheckpointDir())) {
    ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0) << entry.path();
    if (S_ISREG(st.st_mode)) {
      ++files;
      EXPECT_EQ(st.st_mode & 07777, 0600u) << entry.path();
    } else if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 0700u) << entry.path();
    }
  }
  EXPECT_GE(files, 3u);  // at least CURRENT, a MANIFEST and OPTIONS
}

TEST_F(StoreCheckpointTest, RefusesAnExistingDirectoryARelativePathAndAMissingParent) {
  std::filesystem::create_directory(CheckpointDir());
  StatusOr<CheckpointInfo> exists = store_->Checkpoint(CheckpointDir());
  EXPECT_EQ(exists.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(exists.status().message()), HasSubstr(CheckpointDir()));

  StatusOr<CheckpointInfo> relative = store_->Checkpoint("relative/checkpoint");
  EXPECT_EQ(relative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(relative.status().message()), HasSubstr("relative/checkpoint"));

  const std::string orphan = dir_.path() + "/no/such/parent/checkpoint";
  StatusOr<CheckpointInfo> orphaned = store_->Checkpoint(orphan);
  EXPECT_EQ(orphaned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(orphaned.status().message()), HasSubstr(orphan));
  EXPECT_FALSE(std::filesystem::exists(orphan));

  EXPECT_EQ(store_->Checkpoint("").status().code(), absl::StatusCode::kInvalidArgument);
}

// Completions keep arriving while checkpoints are taken: every copy holds each task either done
// with all its trials or not done, and counters that agree with the tasks.
TEST_F(StoreCheckpointTest, CheckpointsTakenUnderConcurrentCompletionsAreConsistent) {
  constexpr uint32_t kSamples = 8;
  constexpr uint32_t kLayers = 8;
  const JobId job = NewJob(kSamples, kLayers);
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    for (uint32_t s = 0; s < kSamples; ++s) {
      for (uint32_t l = 0; l < kLayers; ++l) {
        const TaskKey key{.job = job, .sample = s, .layer = l};
        if (!store_->LeaseTask(key, "w", now_ + 1000).ok() ||
            !store_->CompleteTask(key, Trials(key, 0, 2)).ok()) {
          failed = true;
        }
      }
    }
  });
  std::vector<std::string> dirs;
  for (int i = 0; i < 4; ++i) {
    dirs.push_back(CheckpointDir() + std::to_string(i));
    StatusOr<CheckpointInfo> info = store_->Checkpoint(dirs.back());
    EXPECT_TRUE(info.ok()) << info.status();
  }
  writer.join();
  ASSERT_FALSE(failed);
  for (const std::string& dir : dirs) {
    std::unique_ptr<Store> copy = OpenCopy(dir);
    ASSERT_NE(copy, nullptr);
    StatusOr<Job> copied = copy->GetJob(job);
    StatusOr<std::vector<Task>> tasks = copy->ListTasks(job);
    ASSERT_TRUE(copied.ok() && tasks.ok());
    uint64_t done = 0;
    for (const Task& task : *tasks) {
      StatusOr<std::vector<TrialResult>> results = copy->ListTaskResults(task.key);
      ASSERT_TRUE(results.ok()) << results.status();
      if (task.state == TaskState::kDone) {
        ++done;
        EXPECT_EQ(results->size(), 2u) << dir;
      } else {
        EXPECT_TRUE(results->empty()) << dir;
      }
    }
    EXPECT_EQ(copied->tasks_done, done) << dir;
    StatusOr<uint64_t> count = copy->CountResults(job);
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(*count, 2 * done) << dir;
  }
}

}  // namespace
}  // namespace ripplekv::store
