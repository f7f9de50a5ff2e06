// Pending jobs are bounded: their inline calibration data together is capped at submission
// (SchedulerOptions::max_pending_inline_bytes), and a job that stays pending past
// pending_job_ttl_ms fails, which frees its share of the cap.

#include <string>

#include "gtest/gtest.h"
#include "tests/scheduler/core/scheduler_fixture.h"

namespace ripplekv::scheduler {
namespace {

constexpr uint64_t kKiB = 1024;

// A job whose inline data (text) is `bytes` long.
store::JobSpec InlineSpec(uint64_t bytes) {
  store::JobSpec spec = Spec(/*samples=*/2);
  spec.data_format = store::DataFormat::kText;
  spec.data_inline = std::string(bytes, 'x');
  return spec;
}

class PendingJobsTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerOptions options;
    options.max_pending_inline_bytes = 100 * kKiB;
    options.pending_job_ttl_ms = 60'000;
    Open(options);
  }

  StatusOr<SubmitOutcome> TrySubmit(const store::JobSpec& spec) {
    return scheduler_->SubmitJob({.spec = spec, .model_n_layers = 30});
  }
};

TEST_F(PendingJobsTest, InlineDataOfPendingJobsPastTheCapIsResourceExhausted) {
  for (int i = 0; i < 3; ++i) Submit(InlineSpec(30 * kKiB));  // 90 KiB pending
  StatusOr<SubmitOutcome> refused = TrySubmit(InlineSpec(20 * kKiB));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("0.1 MiB"), std::string::npos) << message;  // 90 KiB pending, 100 cap
  EXPECT_NE(message.find("--max-pending-inline-mib"), std::string::npos) << message;
  auto jobs = store_->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 3u);  // nothing was written
  // What fits still goes in, and so does a job without inline data.
  Submit(InlineSpec(10 * kKiB));
  Submit(Spec(2));
  EXPECT_EQ(TrySubmit(InlineSpec(1)).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(PendingJobsTest, AStartedJobNoLongerCountsAgainstTheCap) {
  const store::Job first = Submit(InlineSpec(60 * kKiB));
  EXPECT_EQ(TrySubmit(InlineSpec(60 * kKiB)).status().code(),
            absl::StatusCode::kResourceExhausted);
  Register("w1");
  ASSERT_TRUE(Next("w1").has_value());  // the first job runs now
  ASSERT_EQ(store_->GetJobMeta(first.id)->state, store::JobState::kRunning);
  EXPECT_TRUE(TrySubmit(InlineSpec(60 * kKiB)).ok());
}

TEST_F(PendingJobsTest, AJobPendingPastItsExpiryFailsNamingWhyAndFreesItsShare) {
  const store::Job old = Submit(InlineSpec(60 * kKiB));
  now_ += 30'000;
  const store::Job young = Submit(InlineSpec(30 * kKiB));
  now_ += 30'000;  // the old one is exactly 60 s old: not past the expiry yet
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(store_->GetJobMeta(old.id)->state, store::JobState::kPending);
  now_ += 1;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const store::Job failed = *store_->GetJobMeta(old.id);
  EXPECT_EQ(failed.state, store::JobState::kFailed);
  EXPECT_NE(failed.error.find("still pending"), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("--pending-job-ttl-ms"), std::string::npos) << failed.error;
  EXPECT_EQ(store_->GetJobMeta(young.id)->state, store::JobState::kPending);
  std::vector<EndedJob> ended = TakeEventsOf<EndedJob>();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, old.id);
  EXPECT_EQ(ended[0].state, store::JobState::kFailed);
  // 30 KiB pending now: 60 more fit.
  EXPECT_TRUE(TrySubmit(InlineSpec(60 * kKiB)).ok());
}

TEST_F(PendingJobsTest, ZeroTurnsTheCapAndTheExpiryOff) {
  SchedulerOptions options;
  options.max_pending_inline_bytes = 0;
  options.pending_job_ttl_ms = 0;
  Open(options);
  for (int i = 0; i < 4; ++i) Submit(InlineSpec(60 * kKiB));
  now_ += 365LL * 24 * 3600 * 1000;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  auto jobs = store_->ListJobs({.active_only = true});
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 4u);
}

}  // namespace
}  // namespace ripplekv::scheduler
