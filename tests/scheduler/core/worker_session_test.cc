#include "scheduler/core/worker_session.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ripplekv::scheduler {
namespace {

Assignment AssignmentOf(store::JobId job, uint32_t sample, uint32_t layer, uint32_t attempt,
                        uint32_t trials) {
  return {.key = {job, sample, layer}, .trials = trials, .attempts = attempt};
}

IncomingResult ResultOf(const std::string& task_id, store::JobId job, int64_t sample, int64_t layer,
                        int64_t trial, double kl = 0.25) {
  return {.task_id = task_id,
          .job_id = std::to_string(job),
          .sample = sample,
          .layer = layer,
          .trial = trial,
          .kl = kl};
}

TEST(WorkerSessionTest, FencesEveryTaskIdItDidNotGiveOut) {
  WorkerSession session;
  session.Assigned("7-0-1-1", AssignmentOf(7, 0, 1, 1, 2));
  EXPECT_NE(session.Held("7-0-1-1"), nullptr);
  EXPECT_EQ(session.Held("7-0-1-2"), nullptr) << "another attempt of the same task";
  EXPECT_EQ(session.Held("8-0-1-1"), nullptr) << "another job's";
  const std::vector<std::string> listed = {"7-0-1-1", "forged"};
  const std::vector<LeaseId> leases = session.Listed(listed);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0], (LeaseId{{7, 0, 1}, 1}));
}

TEST(WorkerSessionTest, KeepsValidResultsUntilTakenAndDropsTheLeaseOnAnInvalidOne) {
  WorkerSession session;
  session.Assigned("7-0-1-1", AssignmentOf(7, 0, 1, 1, 2));
  EXPECT_EQ(session.AddResult("7-0-1-1", ResultOf("7-0-1-1", 7, 0, 1, 0)), "");
  std::optional<WorkerSession::HeldTask> taken = session.Take("7-0-1-1");
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->results.size(), 1u);
  EXPECT_EQ(session.Held("7-0-1-1"), nullptr) << "taken once";

  const struct {
    IncomingResult result;
    std::string says;
  } invalid[] = {
      {ResultOf("7-0-1-1", 7, 0, 1, 0), "twice"},
      {ResultOf("7-0-1-1", 7, 0, 1, 2), "out of range"},
      {ResultOf("7-0-1-1", 8, 0, 1, 1), "not one of its task's trials"},
      {ResultOf("7-0-1-1", 7, 0, 1, -1), "not one of its task's trials"},
      {ResultOf("7-0-2-1", 7, 0, 2, 1), "names task"},
      {ResultOf("7-0-1-1", 7, 0, 1, 1, -1.0), "trial 1"},
  };
  for (const auto& c : invalid) {
    session.Assigned("7-0-1-1", AssignmentOf(7, 0, 1, 1, 2));
    if (c.says == "twice") {
      ASSERT_EQ(session.AddResult("7-0-1-1", ResultOf("7-0-1-1", 7, 0, 1, 0)), "");
    }
    const std::string why = session.AddResult("7-0-1-1", c.result);
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
    EXPECT_EQ(session.Held("7-0-1-1"), nullptr) << why << ": the attempt fails";
  }
}

TEST(WorkerSessionTest, RefusalsMapToWhatTheProtocolSays) {
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kInvalidTask), RefusalStep::kFailJob);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kModelHashMismatch), RefusalStep::kRefuseJob);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kDataUnavailable), RefusalStep::kRefuseJobOrFail);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kInsufficientMemory),
            RefusalStep::kRefuseJobOrFail);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kDraining), RefusalStep::kReleaseAndDrain);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kAtCapacity), RefusalStep::kRelease);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kTransient), RefusalStep::kRelease);
  EXPECT_EQ(WorkerSession::StepFor(RefusalReason::kUnspecified), RefusalStep::kRelease);
}

TEST(WorkerSessionTest, OnlyATaskErrorThatNoRetryCanFixFailsTheJob) {
  EXPECT_TRUE(WorkerSession::ErrorFailsJob(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(WorkerSession::ErrorFailsJob(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(WorkerSession::ErrorFailsJob(absl::StatusCode::kDataLoss));
  EXPECT_FALSE(WorkerSession::ErrorFailsJob(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(WorkerSession::ErrorFailsJob(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(WorkerSession::ErrorFailsJob(absl::StatusCode::kInternal));
}

TEST(WorkerSessionTest, RevocationsAndEndedJobsDropTheirLeasesOnly) {
  WorkerSession session;
  session.Assigned("7-0-1-1", AssignmentOf(7, 0, 1, 1, 2));
  session.Assigned("7-0-2-1", AssignmentOf(7, 0, 2, 1, 2));
  session.Assigned("9-0-0-3", AssignmentOf(9, 0, 0, 3, 2));
  session.Describe(7, "built-in, 4 samples");
  EXPECT_FALSE(session.Revoke({{7, 0, 1}, 2}).has_value()) << "not the attempt held";
  EXPECT_EQ(session.Revoke({{7, 0, 1}, 1}), "7-0-1-1");
  EXPECT_TRUE(session.Described(7, "built-in, 4 samples"));
  session.EndJob(7);
  EXPECT_EQ(session.Held("7-0-2-1"), nullptr);
  EXPECT_FALSE(session.Described(7, "built-in, 4 samples"));
  EXPECT_NE(session.Held("9-0-0-3"), nullptr);
  session.Clear();
  EXPECT_EQ(session.Held("9-0-0-3"), nullptr);
}

}  // namespace
}  // namespace ripplekv::scheduler
