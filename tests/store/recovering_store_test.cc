// RecoveringStore on a real full disk: a 24 MiB tmpfs mounted by the test (skipped, saying why,
// where mounting is not allowed; CI runs as root). Filled to the last byte, the store latches the
// first failed write and refuses every change without touching RocksDB again (no abort on its
// assertion), keeps serving reads, and waits; once space is freed, TryRecover reopens it with the
// leases as they were, and every change that returned OK is there.

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/recovering_store.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::MakeSpec;

class RecoveringStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    disk_ = dir_.File("disk");
    ASSERT_EQ(::mkdir(disk_.c_str(), 0700), 0);
    if (::mount("tmpfs", disk_.c_str(), "tmpfs", 0, "size=24m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a 24 MiB tmpfs (" << std::strerror(errno)
                   << "); this test needs root (CAP_SYS_ADMIN)";
    }
    mounted_ = true;
    StoreOptions options;
    options.memtable_bytes = 4 << 20;  // one family's memtable: 1 MiB
    options.log = [](bool, std::string_view) {};
    StatusOr<std::unique_ptr<RecoveringStore>> store =
        RecoveringStore::Open({.path = disk_ + "/db", .store = options});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    if (mounted_) ::umount2(disk_.c_str(), MNT_DETACH);
  }

  // Fills the file system with disk_/filler, 256 KiB at a time, to the last byte.
  void Fill() {
    const int fd = ::open((disk_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string block(256 << 10, 'f');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
  }

  // A job of one task with `inline_bytes` of inline data.
  StatusOr<CreateJobOutcome> Create(size_t inline_bytes) {
    JobSpec spec = MakeSpec();
    spec.data_inline = std::string(inline_bytes, 'x');
    return store_->CreateJob(spec, std::vector<PlannedTask>{{.sample = 0, .layer = 0}});
  }

  ripplekv::store::testing::TempDir dir_;
  std::string disk_;
  bool mounted_ = false;
  std::unique_ptr<RecoveringStore> store_;
};

TEST_F(RecoveringStoreTest, AFullDiskIsLatchedReadsGoOnAndAReopenRecoversEveryAcknowledgedWrite) {
  ASSERT_FALSE(store_->write_failure());
  StatusOr<CreateJobOutcome> leased_job = Create(1000);
  ASSERT_TRUE(leased_job.ok()) << leased_job.status();
  const TaskKey leased{.job = leased_job->job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(leased, "w1", 1'000'000).ok());

  Fill();
  // Writes of 512 KiB until one fails; every one that returned OK was acknowledged.
  std::vector<JobId> acknowledged = {leased_job->job.id};
  Status failed = absl::OkStatus();
  for (int i = 0; i < 200 && failed.ok(); ++i) {
    StatusOr<CreateJobOutcome> job = Create(512 << 10);
    if (job.ok()) {
      acknowledged.push_back(job->job.id);
    } else {
      failed = job.status();
    }
  }
  ASSERT_FALSE(failed.ok()) << "a full disk took 100 MiB";
  EXPECT_TRUE(absl::IsResourceExhausted(failed)) << failed;
  EXPECT_EQ(failed.message().find(disk_), std::string::npos) << failed;

  const std::optional<WriteFailure> failure = store_->write_failure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->status, failed);
  EXPECT_NE(failure->detail.find("No space left on device"), std::string::npos)
      << failure->detail;

  // Latched: later changes fail the same way without a write (a small one would fit in RocksDB's
  // preallocated log, a sync after the failed append would abort the process), reads go on.
  EXPECT_EQ(Create(10).status(), failed);
  const std::vector<TrialResult> results = {
      {.job = leased.job, .sample = 0, .layer = 0, .trial = 0, .kl = 0.25},
      {.job = leased.job, .sample = 0, .layer = 0, .trial = 1, .kl = 0.5}};
  std::vector<Store::Completion> completion = {
      {.key = leased, .results = results, .worker_id = "w1"}};
  const std::vector<StatusOr<ResultWriteOutcome>> completed = store_->CompleteTasks(completion);
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0].status(), failed);
  EXPECT_EQ(store_->UpdateJobState(acknowledged.back(), JobState::kCancelled, "").status(),
            failed);
  StatusOr<Job> read = store_->GetJob(acknowledged.back());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->spec.data_inline.size(), acknowledged.size() > 1 ? (512u << 10) : 1000u);

  // Still full: TryRecover waits without touching the database.
  EXPECT_TRUE(absl::IsResourceExhausted(store_->TryRecover()));
  EXPECT_EQ(store_->reopens(), 0u);
  EXPECT_TRUE(store_->write_failure().has_value());

  ASSERT_EQ(::unlink((disk_ + "/filler").c_str()), 0);
  ASSERT_TRUE(store_->TryRecover().ok());
  EXPECT_EQ(store_->reopens(), 1u);
  EXPECT_FALSE(store_->write_failure());
  EXPECT_TRUE(store_->TryRecover().ok());  // healthy: nothing to do
  EXPECT_EQ(store_->reopens(), 1u);

  for (JobId id : acknowledged) {
    StatusOr<Job> job = store_->GetJobMeta(id);
    EXPECT_TRUE(job.ok()) << "acknowledged job " << id << ": " << job.status();
  }
  // The lease outlived the reopen (the scheduler's workers still hold theirs).
  StatusOr<Task> task = store_->GetTask(leased);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->state, TaskState::kLeased);
  EXPECT_EQ(task->lease_owner, "w1");
  EXPECT_EQ(store_->RecoveredLeases(), 0u);
  // Writable again, and ids go on above every acknowledged one.
  StatusOr<CreateJobOutcome> after = Create(10);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->job.id, acknowledged.back());
  const std::vector<StatusOr<ResultWriteOutcome>> done = store_->CompleteTasks(completion);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok()) << done[0].status();
}

}  // namespace
}  // namespace ripplekv::store
