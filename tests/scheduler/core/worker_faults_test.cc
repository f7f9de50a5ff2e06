// Faulty workers in the scheduler core (docs/SCHEDULER.md, "Faulty workers" and "Verified
// results"): failures charged to workers, exclusion and quarantine, verification by distinct
// workers with recomputation of an outvoted worker's work, unique identities, and the seeded
// verification sample.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"
#include "method/profile.h"
#include "tests/scheduler/core/scheduler_fixture.h"

namespace ripplekv::scheduler {
namespace {

constexpr int64_t kGraceMs = 60'000;
constexpr int64_t kQuarantineMs = 1'800'000;

// A job of one sample over `layers` layers of the 30-layer model: `layers` tasks (0, l).
store::JobSpec SmallSpec(uint32_t layers) {
  store::JobSpec spec = Spec(1);
  for (uint32_t l = 0; l < layers; ++l) spec.params.layers.push_back(l);
  return spec;
}

// Plausible but wrong results of `key` (ten times the true KL), as a bad machine returns.
std::vector<store::TrialResult> WrongResultsOf(const store::TaskKey& key, uint32_t trials) {
  std::vector<store::TrialResult> out = ResultsOf(key, trials);
  for (store::TrialResult& r : out) r.kl *= 10;
  return out;
}

class WorkerFaultsTest : public SchedulerTest {
 protected:
  store::Job SubmitVerified(const store::JobSpec& spec, double fraction) {
    auto outcome =
        scheduler_->SubmitJob({.spec = spec, .model_n_layers = 30, .verify_fraction = fraction});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job : store::Job{};
  }

  Status Fail(const std::string& id, const store::TaskKey& key) {
    return scheduler_->FailAttempt(id, Held(key), "task failed on the worker");
  }

  StatusOr<TaskResultsOutcome> Deliver(const std::string& id, const store::TaskKey& key,
                                       const std::vector<store::TrialResult>& results) {
    return scheduler_->CompleteTask(id, Held(key), results);
  }

  store::Job JobNow(store::JobId id) {
    auto job = store_->GetJobMeta(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : store::Job{};
  }

  // Waits (bounded) for a commit queued without a caller (CommitHeld) to land.
  bool AwaitDone(store::JobId id, uint64_t tasks_done) {
    for (int i = 0; i < 500; ++i) {
      if (JobNow(id).tasks_done >= tasks_done) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  method::SensitivityProfile Profile(store::JobId id) {
    auto parsed = method::ProfileFromJson(ProfileJson(id));
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *parsed : method::SensitivityProfile{};
  }
};

TEST_F(WorkerFaultsTest, AFailedTaskGoesToAnotherWorkerNotBackToTheOneThatFailedIt) {
  Register("bad");
  Register("good");
  const store::Job job = Submit(SmallSpec(2));
  const store::TaskKey first{job.id, 0, 0}, second{job.id, 0, 1};
  ASSERT_EQ(Next("bad")->key, first);
  ASSERT_TRUE(Fail("bad", first).ok());
  ASSERT_EQ(Next("bad")->key, second) << "not the task it failed";
  ASSERT_TRUE(Fail("bad", second).ok());
  EXPECT_FALSE(Next("bad").has_value()) << "both failed here while another worker can run them";
  now_ += kGraceMs;
  EXPECT_FALSE(Next("bad").has_value()) << "the grace does not matter while another can";
  EXPECT_EQ(Next("good")->key, first);
}

TEST_F(WorkerFaultsTest, AfterTheGraceAFailedTaskReturnsToTheOnlyWorker) {
  Register("only");
  const store::Job job = Submit(SmallSpec(1));
  ASSERT_TRUE(Next("only").has_value());
  ASSERT_TRUE(Fail("only", {job.id, 0, 0}).ok());
  EXPECT_FALSE(Next("only").has_value());
  now_ += kGraceMs - 1;
  EXPECT_FALSE(Next("only").has_value());
  now_ += 1;
  const std::optional<Assignment> again = Next("only");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempts, 2u);
}

TEST_F(WorkerFaultsTest, MaxAttemptsCountsDistinctWorkersOnly) {
  SchedulerOptions options;
  options.max_attempts = 2;
  options.faults.quarantine_failures = 100;  // this test is about the task's count
  Open(options);
  Register("a");
  const store::Job job = Submit(SmallSpec(1));
  const store::TaskKey key{job.id, 0, 0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Next("a").has_value()) << "round " << i;
    ASSERT_TRUE(Fail("a", key).ok());
    now_ += kGraceMs;
  }
  EXPECT_EQ(JobNow(job.id).state, store::JobState::kRunning) << "five failures, one worker";
  Register("b");
  ASSERT_TRUE(Next("b").has_value());
  ASSERT_TRUE(Fail("b", key).ok());
  const store::Job failed = JobNow(job.id);
  EXPECT_EQ(failed.state, store::JobState::kFailed);
  EXPECT_NE(failed.error.find("failed 2 attempts on distinct workers"), std::string::npos)
      << failed.error;
}

TEST_F(WorkerFaultsTest, RepeatedFailuresQuarantineTheWorkerUntilTheCoolDownOrAnAdmin) {
  Register("bad", /*capacity=*/4);
  Register("good");
  const store::Job job = Submit(SmallSpec(6));
  std::vector<store::TaskKey> held;
  while (auto a = Next("bad")) held.push_back(a->key);
  ASSERT_EQ(held.size(), 4u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Fail("bad", held[i]).ok());
  // Quarantined at the third: its fourth lease went back to pending, uncounted.
  const std::vector<QuarantineNotice> notices = TakeEventsOf<QuarantineNotice>();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].worker_id, "bad");
  EXPECT_NE(notices[0].reason.find("3 failed attempts"), std::string::npos) << notices[0].reason;
  EXPECT_EQ(notices[0].until_ms, now_ + kQuarantineMs);
  EXPECT_EQ(store_->GetTask(held[3])->state, store::TaskState::kPending);
  EXPECT_FALSE(Next("bad").has_value());
  EXPECT_EQ(JobNow(job.id).state, store::JobState::kRunning);
  EXPECT_TRUE(TakeEventsOf<QuarantineNotice>().empty()) << "each notice is taken once";

  // Listed, and its registration refused while quarantined (it left, as the adapter makes it).
  ASSERT_TRUE(scheduler_->WorkerGone("bad").ok());
  auto page = scheduler_->ListWorkers({});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->workers.size(), 2u);
  EXPECT_EQ(page->workers[0].worker_id, "bad");
  EXPECT_FALSE(page->workers[0].connected);
  EXPECT_TRUE(page->workers[0].quarantined);
  EXPECT_EQ(page->workers[0].quarantined_until_ms, now_ + kQuarantineMs);
  EXPECT_TRUE(page->workers[1].connected);
  EXPECT_FALSE(page->workers[1].quarantined);
  const Status refused = scheduler_->RegisterWorker({.worker_id = "bad", .model = Model()});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("quarantined until"), std::string::npos) << refused;

  // An admin lifts it; a second lift finds nothing.
  auto lifted = scheduler_->LiftQuarantine("bad");
  ASSERT_TRUE(lifted.ok()) << lifted.status();
  EXPECT_NE(lifted->find("3 failed attempts"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(scheduler_->LiftQuarantine("bad").status()));
  Register("bad");

  // Again, on the tasks it has not failed yet, and this time the cool-down ends it.
  for (int i = 0; i < 3; ++i) {
    const std::optional<Assignment> a = Next("bad");
    ASSERT_TRUE(a.has_value()) << i;
    ASSERT_TRUE(Fail("bad", a->key).ok());
  }
  EXPECT_EQ(TakeEventsOf<QuarantineNotice>().size(), 1u);
  now_ += kQuarantineMs;
  ASSERT_TRUE(scheduler_->Heartbeat("bad", {}, {}).ok());  // still registered in this test
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  auto after = scheduler_->ListWorkers({});
  ASSERT_TRUE(after.ok());
  ASSERT_FALSE(after->workers.empty());
  EXPECT_EQ(after->workers[0].worker_id, "bad");
  EXPECT_FALSE(after->workers[0].quarantined);
  EXPECT_TRUE(Next("bad").has_value());
}

TEST_F(WorkerFaultsTest, AHoarderWhoseLeasesExpireIsQuarantinedAndTheJobGoesOn) {
  Register("hoarder", /*capacity=*/8);
  Register("good");
  const store::Job job = Submit(SmallSpec(10));
  int held = 0;
  while (Next("hoarder")) ++held;
  ASSERT_EQ(held, 8);
  now_ += SchedulerOptions().lease_duration_ms;
  // Both heartbeat; the hoarder lists none of its leases.
  ASSERT_TRUE(scheduler_->Heartbeat("hoarder", {}, {}).ok());
  ASSERT_TRUE(scheduler_->Heartbeat("good", {}, {}).ok());
  auto expired = scheduler_->ExpireLeases();
  ASSERT_TRUE(expired.ok()) << expired.status();
  const std::vector<QuarantineNotice> notices = TakeEventsOf<QuarantineNotice>();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].reason.find("stopped renewing its lease"), std::string::npos);
  EXPECT_FALSE(Next("hoarder").has_value());
  // Every task completes on the healthy worker.
  const TaskResultsOutcome last = Drain("good", 2);
  EXPECT_TRUE(last.job_succeeded);
  EXPECT_EQ(JobNow(job.id).state, store::JobState::kSucceeded);
}

TEST_F(WorkerFaultsTest, AJobWhoseWorkersAreAllQuarantinedWaitsThenFailsAfterTheJobWait) {
  SchedulerOptions options;
  options.faults.job_wait_ms = 120'000;
  Open(options);
  Register("bad", /*capacity=*/3);
  const store::Job job = Submit(SmallSpec(3));
  std::vector<store::TaskKey> held;
  while (auto a = Next("bad")) held.push_back(a->key);
  for (const store::TaskKey& key : held) ASSERT_TRUE(Fail("bad", key).ok());
  auto progress = scheduler_->Progress(job.id);
  ASSERT_TRUE(progress.ok());
  EXPECT_NE(progress->waiting_reason.find("no healthy worker"), std::string::npos)
      << progress->waiting_reason;
  EXPECT_NE(progress->waiting_reason.find("1 quarantined: bad"), std::string::npos)
      << progress->waiting_reason;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());  // the stall clock starts
  now_ += 120'000;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(JobNow(job.id).state, store::JobState::kRunning) << "not past the wait yet";
  now_ += 1;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  const store::Job failed = JobNow(job.id);
  EXPECT_EQ(failed.state, store::JobState::kFailed);
  EXPECT_NE(failed.error.find("no progress for 120 s"), std::string::npos) << failed.error;
}

TEST_F(WorkerFaultsTest, AJobWaitingForWorkersToRegisterWaitsForever) {
  const store::Job job = Submit(SmallSpec(2));
  auto progress = scheduler_->Progress(job.id);
  ASSERT_TRUE(progress.ok());
  EXPECT_NE(progress->waiting_reason.find("no worker of model"), std::string::npos)
      << progress->waiting_reason;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(scheduler_->ExpireLeases().ok());
    now_ += FaultOptions().job_wait_ms;
  }
  EXPECT_EQ(JobNow(job.id).state, store::JobState::kPending);
}

TEST_F(WorkerFaultsTest, AVerifiedTaskCompletesOnlyWhenTwoDistinctWorkersAgree) {
  Register("a");
  Register("b");
  const store::Job job = SubmitVerified(SmallSpec(1), 1.0);
  const store::TaskKey key{job.id, 0, 0};
  ASSERT_EQ(Next("a")->key, key);
  auto held = Deliver("a", key, ResultsOf(key, 2));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_FALSE(held->task_completed) << "held for a second run";
  EXPECT_EQ(store_->GetTask(key)->state, store::TaskState::kPending);
  EXPECT_FALSE(Next("a").has_value()) << "never the same worker twice";
  auto progress = scheduler_->Progress(job.id);
  ASSERT_TRUE(progress.ok());
  EXPECT_TRUE(progress->waiting_reason.empty()) << "b can run it: " << progress->waiting_reason;
  ASSERT_EQ(Next("b")->key, key);
  auto agreed = Deliver("b", key, ResultsOf(key, 2));
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_TRUE(agreed->task_completed);
  EXPECT_TRUE(agreed->job_succeeded);
  const method::SensitivityProfile profile = Profile(job.id);
  ASSERT_TRUE(profile.verification.has_value());
  EXPECT_EQ(profile.verification->fraction, 1.0);
  EXPECT_EQ(profile.verification->tasks_verified, 1u);
  EXPECT_TRUE(profile.verification->disagreements.empty());
}

TEST_F(WorkerFaultsTest, AnOutvotedWorkerIsQuarantinedAndEverythingItCompletedIsRecomputed) {
  // A key under which the job's (sample 0, layer 0) is outside the sample and layer 1 inside, so
  // the bad worker completes one task unverified before it is caught.
  SchedulerOptions options;
  for (options.faults.verify_key = 1; VerificationSelected(options.faults.verify_key, {1, 0, 0}, 0.5) ||
                                      !VerificationSelected(options.faults.verify_key, {1, 0, 1}, 0.5);
       ++options.faults.verify_key) {
  }
  Open(options);
  Register("bad");
  Register("g1");
  Register("g2");
  const store::Job job = SubmitVerified(SmallSpec(3), 0.5);
  ASSERT_EQ(job.id, 1u);
  std::vector<store::TaskKey> committed_by_bad;
  std::optional<store::TaskKey> disputed;
  while (!disputed) {
    std::optional<Assignment> a = Next("bad");
    ASSERT_TRUE(a.has_value());
    auto outcome = Deliver("bad", a->key, WrongResultsOf(a->key, 2));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    if (outcome->task_completed) {
      committed_by_bad.push_back(a->key);
    } else {
      disputed = a->key;
    }
  }
  // g1 disagrees with bad: nobody is outvoted yet, the task waits for a third worker.
  std::optional<Assignment> g1 = Next("g1");
  while (g1 && g1->key != *disputed) {
    ASSERT_TRUE(Deliver("g1", g1->key, ResultsOf(g1->key, 2)).ok());
    g1 = Next("g1");
  }
  ASSERT_TRUE(g1.has_value());
  auto second = Deliver("g1", *disputed, ResultsOf(*disputed, 2));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->task_completed);
  EXPECT_TRUE(TakeEventsOf<QuarantineNotice>().empty());
  std::optional<Assignment> g2 = Next("g2");
  ASSERT_TRUE(g2.has_value());
  ASSERT_EQ(g2->key, *disputed) << "the lowest pending task";
  auto third = Deliver("g2", *disputed, ResultsOf(*disputed, 2));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->task_completed);
  const std::vector<QuarantineNotice> notices = TakeEventsOf<QuarantineNotice>();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].worker_id, "bad");
  EXPECT_NE(notices[0].reason.find("outvoted"), std::string::npos) << notices[0].reason;
  // The bad worker's unverified work is pending again, and runs on the healthy workers.
  ASSERT_EQ(committed_by_bad.size(), 1u);
  for (const store::TaskKey& key : committed_by_bad) {
    EXPECT_EQ(store_->GetTask(key)->state, store::TaskState::kPending);
  }
  TaskResultsOutcome last;
  while (auto a = Next("g1")) {
    auto outcome = Deliver("g1", a->key, ResultsOf(a->key, 2));
    ASSERT_TRUE(outcome.ok());
    if (!outcome->task_completed) {  // in the sample: g2 verifies it
      ASSERT_EQ(Next("g2")->key, a->key);
      outcome = Deliver("g2", a->key, ResultsOf(a->key, 2));
      ASSERT_TRUE(outcome.ok());
    }
    last = *outcome;
  }
  EXPECT_TRUE(last.job_succeeded);
  auto results = store_->ListResults(job.id);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 6u);
  for (const store::TrialResult& r : *results) {
    EXPECT_EQ(r.kl, Kl(r.sample, r.layer, r.trial)) << "layer " << r.layer;
  }
  const method::SensitivityProfile profile = Profile(job.id);
  ASSERT_TRUE(profile.verification.has_value());
  EXPECT_EQ(profile.verification->tasks_recomputed, committed_by_bad.size());
  ASSERT_EQ(profile.verification->disagreements.size(), 1u);
  const auto& d = profile.verification->disagreements[0];
  EXPECT_EQ(d.outvoted_worker, "bad");
  EXPECT_EQ(d.layer, disputed->layer);
  EXPECT_EQ(d.agreeing_workers, (std::vector<std::string>{"g1", "g2"}));
}

TEST_F(WorkerFaultsTest, AVerifiedTaskWithNoSecondWorkerCompletesUnverifiedAfterTheWait) {
  SchedulerOptions options;
  options.faults.verify_wait_ms = 5'000;
  Open(options);
  Register("only");
  const store::Job job = SubmitVerified(SmallSpec(1), 1.0);
  const store::TaskKey key{job.id, 0, 0};
  ASSERT_TRUE(Next("only").has_value());
  auto held = Deliver("only", key, ResultsOf(key, 2));
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->task_completed);
  auto progress = scheduler_->Progress(job.id);
  ASSERT_TRUE(progress.ok());
  EXPECT_NE(progress->waiting_reason.find("await verification"), std::string::npos)
      << progress->waiting_reason;
  now_ += 4'999;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  EXPECT_EQ(store_->GetTask(key)->state, store::TaskState::kPending);
  now_ += 1;
  ASSERT_TRUE(scheduler_->ExpireLeases().ok());
  ASSERT_TRUE(AwaitDone(job.id, 1));
  // The job finishes on the committer's thread, or on the next tick.
  for (int i = 0; i < 500 && JobNow(job.id).state != store::JobState::kSucceeded; ++i) {
    ASSERT_TRUE(scheduler_->ExpireLeases().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(JobNow(job.id).state, store::JobState::kSucceeded);
  const method::SensitivityProfile profile = Profile(job.id);
  ASSERT_TRUE(profile.verification.has_value());
  EXPECT_EQ(profile.verification->tasks_verified, 0u);
  EXPECT_EQ(profile.verification->tasks_unverified, 1u);
}

TEST_F(WorkerFaultsTest, ALiveSessionsIdIsRefusedUnlessReplacedOrTheSameProcess) {
  const WorkerRegistration first{.worker_id = "w",
                                 .model = Model(),
                                 .version = "ripplekv 0.1.0 (abc)",
                                 .host = "node-1",
                                 .device = "cpu",
                                 .instance = "p1"};
  ASSERT_TRUE(scheduler_->RegisterWorker(first).ok());
  WorkerRegistration other = first;
  other.instance = "p2";
  const Status refused = scheduler_->RegisterWorker(other);
  ASSERT_TRUE(absl::IsAlreadyExists(refused)) << refused;
  EXPECT_NE(refused.message().find("held by a live session (host node-1"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("--replace"), std::string::npos) << refused;
  EXPECT_TRUE(scheduler_->RegisterWorker(first).ok()) << "the same process registers again";
  other.replace = true;
  EXPECT_TRUE(scheduler_->RegisterWorker(other).ok()) << "an explicit takeover";
  other.replace = false;
  other.instance = "p3";
  now_ += FaultOptions().live_session_ms;
  EXPECT_TRUE(scheduler_->RegisterWorker(other).ok()) << "a session silent that long is stale";
}

TEST(VerificationSampleTest, DrawsEachTaskIndependentlyWithTheFraction) {
  constexpr int kTasks = 200'000;
  for (double fraction : {0.05, 0.3}) {
    int selected = 0;
    for (int i = 0; i < kTasks; ++i) {
      const store::TaskKey key{static_cast<store::JobId>(1 + i % 7),
                               static_cast<uint32_t>(i / 7 / 30), static_cast<uint32_t>(i % 30)};
      selected += VerificationSelected(0x5eed, key, fraction) ? 1 : 0;
    }
    // Binomial(kTasks, fraction): within 6 standard deviations.
    const double sd = std::sqrt(kTasks * fraction * (1 - fraction));
    EXPECT_NEAR(selected, kTasks * fraction, 6 * sd) << fraction;
  }
  const store::TaskKey key{3, 1, 4};
  EXPECT_FALSE(VerificationSelected(1, key, 0.0));
  EXPECT_TRUE(VerificationSelected(1, key, 1.0));
  // The catch probability docs/SCHEDULER.md states: a worker that completes k tasks of a job has
  // at least one of them verified with probability 1 - (1 - f)^k. Over many keys (schedulers),
  // the empirical rate for k = 20 tasks and f = 0.05 matches 1 - 0.95^20 = 0.6415.
  constexpr int kKeys = 20'000;
  int caught = 0;
  for (int k = 1; k <= kKeys; ++k) {
    bool any = false;
    for (uint32_t l = 0; l < 20; ++l) any |= VerificationSelected(k, {1, 0, l}, 0.05);
    caught += any ? 1 : 0;
  }
  const double p = 1 - std::pow(0.95, 20);
  EXPECT_NEAR(caught, kKeys * p, 6 * std::sqrt(kKeys * p * (1 - p)));
}

TEST(ResultsAgreeTest, BitwiseForOneBuildAndWithinTheDeviceTolerancesOtherwise) {
  const std::vector<store::TrialResult> a = {{1, 0, 0, 0, 0.5}, {1, 0, 0, 1, 0.25}};
  std::vector<store::TrialResult> b = a;
  b[1].kl = std::nextafter(0.25, 1.0);
  EXPECT_TRUE(ResultsAgree(a, a, /*same_numerics=*/true, 0));
  EXPECT_FALSE(ResultsAgree(a, b, /*same_numerics=*/true, 1e-2)) << "one ulp is a difference";
  EXPECT_TRUE(ResultsAgree(a, b, /*same_numerics=*/false, 1e-2));
  b[1].kl = 0.25 * 1.02;
  EXPECT_FALSE(ResultsAgree(a, b, false, 1e-2));
  EXPECT_TRUE(ResultsAgree(a, b, false, 5e-2));
  b.pop_back();
  EXPECT_FALSE(ResultsAgree(a, b, false, 1.0)) << "a trial missing";
  EXPECT_EQ(NumericsTolerance("cpu-fp32/ripplekv 0.1.0 (a) x86-64-v3 openblas",
                              "cpu-fp32/ripplekv 0.1.0 (b) x86-64-v4 openblas"),
            1e-2);
  EXPECT_EQ(NumericsTolerance("cpu-fp32/x", "cuda-bf16/x"), 5e-2);
  EXPECT_EQ(NumericsTolerance("", "cpu-fp32/x"), 5e-2);
}

}  // namespace
}  // namespace ripplekv::scheduler
