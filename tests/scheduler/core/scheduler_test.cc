#include "scheduler/core/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <random>

#include "gtest/gtest.h"
#include "method/profile_aggregate.h"
#include "tests/scheduler/core/scheduler_fixture.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::scheduler {
namespace {

TEST_F(SchedulerTest, SubmitPlansSampleTimesLayerTasks) {
  store::Job job = Submit(Spec(8));
  EXPECT_EQ(job.tasks_total, 8u * 30u);
  store::JobSpec some = Spec(3);
  some.params.layers = {1, 4};
  EXPECT_EQ(Submit(some).tasks_total, 6u);
}

TEST_F(SchedulerTest, SubmitNamesTheBadFieldAndNeedsTheLayerCount) {
  store::JobSpec bad = Spec(2);
  bad.params.alpha = -1;
  auto r = scheduler_->SubmitJob({.spec = bad, .model_n_layers = 30});
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("params.alpha"), std::string_view::npos);
  r = scheduler_->SubmitJob({.spec = Spec(2)});  // no layer count, no worker
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("model.n_layers"), std::string_view::npos);
  Register("w1");  // now the model's layer count is known from the worker
  r = scheduler_->SubmitJob({.spec = Spec(2)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job.tasks_total, 60u);
}

TEST_F(SchedulerTest, IdempotencyKeyReturnsTheSameJob) {
  store::JobSpec spec = Spec(2);
  spec.idempotency_key = "k1";
  store::Job a = Submit(spec);
  store::Job b = Submit(spec);
  EXPECT_EQ(a.id, b.id);
  spec.params.trials = 5;
  EXPECT_TRUE(
      absl::IsAlreadyExists(scheduler_->SubmitJob({.spec = spec, .model_n_layers = 30}).status()));
}

TEST_F(SchedulerTest, RunsJobsByPriorityThenAge) {
  store::Job old_low = Submit(Spec(1, 1, /*priority=*/0));
  now_ += 10;
  store::Job old_high = Submit(Spec(1, 1, /*priority=*/5));
  now_ += 10;
  store::Job new_high = Submit(Spec(1, 1, /*priority=*/5));
  Register("w1", /*capacity=*/1000);
  std::vector<store::JobId> order;
  while (auto a = Next("w1")) {
    if (order.empty() || order.back() != a->key.job) order.push_back(a->key.job);
  }
  EXPECT_EQ(order, (std::vector<store::JobId>{old_high.id, new_high.id, old_low.id}));
}

TEST_F(SchedulerTest, WorkerHoldingASamplesPrefillGetsItsTasksFirst) {
  store::Job job = Submit(Spec(8));
  Register("w1");
  const std::vector<PrefillKey> held = {{job.id, 3}};
  ASSERT_TRUE(scheduler_->Heartbeat("w1", held, {}).ok());
  for (uint32_t layer = 0; layer < 30; ++layer) {
    auto a = Next("w1");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->key.sample, 3u);
    EXPECT_EQ(a->key.layer, layer);
    EXPECT_TRUE(a->prefill_held);
    Complete("w1", a->key, 2);
  }
  // Sample 3 is finished: back to the lowest sample.
  auto a = Next("w1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->key.sample, 0u);
}

// Four simulated workers (capacity 1, a prefill cache of 2 samples each) run an 8-sample x
// 30-layer job in lock step; counts how many prefills they do with and without affinity.
int64_t SimulatePrefills(Scheduler& scheduler, store::JobId job, int cache_samples) {
  struct Sim {
    std::string id;
    std::list<PrefillKey> cache;  // most recent first
  };
  std::vector<Sim> sims = {{"w0", {}}, {"w1", {}}, {"w2", {}}, {"w3", {}}};
  int64_t prefills = 0;
  bool any = true;
  while (any) {
    any = false;
    for (Sim& w : sims) {
      auto a = scheduler.NextTask(w.id);
      EXPECT_TRUE(a.ok());
      if (!a.ok() || !*a) continue;
      any = true;
      const PrefillKey key{job, (*a)->key.sample};
      auto hit = std::find(w.cache.begin(), w.cache.end(), key);
      if (hit == w.cache.end()) {
        ++prefills;
        w.cache.push_front(key);
        if (static_cast<int>(w.cache.size()) > cache_samples) w.cache.pop_back();
      } else {
        w.cache.splice(w.cache.begin(), w.cache, hit);
      }
      std::vector<PrefillKey> held(w.cache.begin(), w.cache.end());
      EXPECT_TRUE(scheduler.Heartbeat(w.id, held, {}).ok());
      EXPECT_TRUE(
          scheduler.CompleteTask(w.id, {(*a)->key, (*a)->attempts}, ResultsOf((*a)->key, 2)).ok());
    }
  }
  return prefills;
}

TEST_F(SchedulerTest, AffinityCutsPrefillsOfAFourWorkerJob) {
  int64_t prefills[2] = {0, 0};
  for (bool affinity : {false, true}) {
    SchedulerOptions options;
    options.prefill_affinity = affinity;
    Open(options);
    store::Job job = Submit(Spec(8));
    for (const char* id : {"w0", "w1", "w2", "w3"}) Register(id);
    prefills[affinity] = SimulatePrefills(*scheduler_, job.id, /*cache_samples=*/2);
    auto done = store_->GetJob(job.id);
    ASSERT_TRUE(done.ok());
    EXPECT_EQ(done->state, store::JobState::kSucceeded);
  }
  std::printf(
      "[ affinity ] 4 workers, 8 samples x 30 layers: %lld prefills without affinity, "
      "%lld with (%.0f%% of the prefill work saved)\n",
      static_cast<long long>(prefills[0]), static_cast<long long>(prefills[1]),
      100.0 * (1.0 - static_cast<double>(prefills[1]) / prefills[0]));
  EXPECT_EQ(prefills[1], 8);  // each sample prefilled exactly once
  EXPECT_GE(prefills[0], 4 * 8 - 4);
}

TEST_F(SchedulerTest, SubmittedResultsFreeTheSlotBeforeTheirWriteAndAreWrittenInOrder) {
  Register("w1");
  Register("w2");
  const store::Job job = Submit(Spec(2));
  const std::optional<Assignment> a1 = Next("w1");
  const std::optional<Assignment> a2 = Next("w2");
  ASSERT_TRUE(a1 && a2);
  // The first completion's callback holds the committer's thread: nothing after it is written.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<StatusOr<TaskResultsOutcome>> first;
  ASSERT_TRUE(scheduler_
                  ->SubmitTaskResults("w1", Held(a1->key), ResultsOf(a1->key, 2),
                                      [&](StatusOr<TaskResultsOutcome> o) {
                                        first.set_value(std::move(o));
                                        released.wait();
                                      })
                  .ok());
  std::promise<StatusOr<TaskResultsOutcome>> second;
  std::future<StatusOr<TaskResultsOutcome>> second_done = second.get_future();
  ASSERT_TRUE(scheduler_
                  ->SubmitTaskResults(
                      "w2", Held(a2->key), ResultsOf(a2->key, 2),
                      [&](StatusOr<TaskResultsOutcome> o) { second.set_value(std::move(o)); })
                  .ok());
  // w2 (capacity 1) gets its next task although its results are not written yet.
  const std::optional<Assignment> a3 = Next("w2");
  ASSERT_TRUE(a3.has_value());
  EXPECT_NE(a3->key, a2->key);
  EXPECT_EQ(second_done.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  // A lease given back is no lease to complete twice.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      scheduler_->SubmitTaskResults("w2", Held(a2->key), ResultsOf(a2->key, 2), nullptr).status()));

  release.set_value();
  StatusOr<TaskResultsOutcome> written = second_done.get();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->task_completed);
  EXPECT_EQ(written->stored, 2u);
  auto stored = store_->GetJob(job.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->tasks_done, 2u);
}

TEST_F(SchedulerTest, InvalidSubmittedResultsFailTheAttemptAtOnceAndNeverReachTheCommitter) {
  Register("w1");
  Submit(Spec(1));
  const std::optional<Assignment> a = Next("w1");
  ASSERT_TRUE(a.has_value());
  std::vector<store::TrialResult> results = ResultsOf(a->key, 2);
  results[1].kl = -1.0;
  bool called = false;
  const Status s = scheduler_
                       ->SubmitTaskResults("w1", Held(a->key), results,
                                           [&](StatusOr<TaskResultsOutcome>) { called = true; })
                       .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  scheduler_->StopCompletions();  // writes whatever was queued, runs its callbacks
  EXPECT_FALSE(called);
  auto task = store_->GetTask(a->key);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, store::TaskState::kPending);
}

TEST_F(SchedulerTest, CompletionsAfterStopAreRefusedWithoutAWrite) {
  Register("w1");
  Submit(Spec(1));
  const std::optional<Assignment> a = Next("w1");
  ASSERT_TRUE(a.has_value());
  scheduler_->StopCompletions();
  auto outcome = scheduler_->CompleteTask("w1", Held(a->key), ResultsOf(a->key, 2));
  EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  auto task = store_->GetTask(a->key);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, store::TaskState::kLeased) << "not written; its lease expires as usual";
  EXPECT_EQ(scheduler_->CommitCounts().completions, 0u);
}

TEST_F(SchedulerTest, WorkerWithAnotherModelHashIsNeverLeasedTheJob) {
  store::Job job = Submit(Spec(2));
  Register("stranger", 100, kOtherHash);
  EXPECT_FALSE(Next("stranger"));
  Register("w1");
  auto a = Next("w1");
  ASSERT_TRUE(a);
  auto r = scheduler_->CompleteTask("stranger", Held(a->key), ResultsOf(a->key, 2));
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_EQ(store_->GetJob(job.id)->results_stored, 0u);
}

TEST_F(SchedulerTest, ExpiredLeaseGoesToAnotherWorkerAndLateResultsAreRejected) {
  SchedulerOptions options;
  options.lease_duration_ms = 1000;
  options.heartbeat_timeout_ms = 1'000'000;
  Open(options);
  store::Job job = Submit(Spec(1, 2));
  Register("slow");
  Register("fast");
  auto a = Next("slow");
  ASSERT_TRUE(a);
  now_ += 1001;
  auto expired = scheduler_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->released.size(), 1u);
  EXPECT_EQ(expired->released[0], a->key);
  auto b = Next("fast");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, a->key);
  EXPECT_EQ(b->attempts, 2u);
  const std::vector<Revocation> revoked = TakeEventsOf<Revocation>();
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0].worker_id, "slow");
  EXPECT_EQ(revoked[0].lease, (LeaseId{a->key, 1}));
  // The slow worker's stale attempt is fenced off, before and after the task is done.
  auto stale = scheduler_->CompleteTask("slow", {a->key, a->attempts}, ResultsOf(a->key, 2));
  EXPECT_TRUE(absl::IsFailedPrecondition(stale.status())) << stale.status();
  TaskResultsOutcome first = Complete("fast", b->key, 2);
  EXPECT_EQ(first.stored, 2u);
  stale = scheduler_->CompleteTask("slow", {a->key, a->attempts}, ResultsOf(a->key, 2));
  EXPECT_TRUE(absl::IsFailedPrecondition(stale.status())) << stale.status();
  store::Job after = *store_->GetJob(job.id);
  EXPECT_EQ(after.results_stored, 2u);
  EXPECT_EQ(*store_->CountResults(job.id), 2u);
}

TEST_F(SchedulerTest, SilentWorkerIsDroppedAndItsLeaseReturns) {
  SchedulerOptions options;
  options.lease_duration_ms = 1'000'000;
  options.heartbeat_timeout_ms = 5000;
  Open(options);
  Submit(Spec(1));
  Register("silent");
  Register("alive");
  auto a = Next("silent");
  ASSERT_TRUE(a);
  now_ += 5001;
  ASSERT_TRUE(scheduler_->Heartbeat("alive", {}, {}).ok());
  auto out = scheduler_->ExpireLeases();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->dropped_workers, std::vector<std::string>{"silent"});
  EXPECT_EQ(out->released, std::vector<store::TaskKey>{a->key});
  EXPECT_EQ(scheduler_->Workers(), std::vector<std::string>{"alive"});
  EXPECT_TRUE(absl::IsNotFound(scheduler_->NextTask("silent").status()));
  auto b = Next("alive");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, a->key);
}

TEST_F(SchedulerTest, CancelledJobHandsOutNothingAndIgnoresResults) {
  store::Job job = Submit(Spec(2));
  Register("w1");
  auto a = Next("w1");
  ASSERT_TRUE(a);
  auto cancelled = scheduler_->CancelJob(job.id, "user asked");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_FALSE(cancelled->already_cancelled);
  EXPECT_EQ(cancelled->job.state, store::JobState::kCancelled);
  // The outbox: the lease revoked on its worker, then the job ended, in that order.
  const std::vector<Event> events = scheduler_->TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<Revocation>(events[0]));
  EXPECT_EQ(std::get<Revocation>(events[0]).worker_id, "w1");
  EXPECT_EQ(std::get<Revocation>(events[0]).lease, (LeaseId{a->key, a->attempts}));
  ASSERT_TRUE(std::holds_alternative<EndedJob>(events[1]));
  EXPECT_EQ(std::get<EndedJob>(events[1]).id, job.id);
  EXPECT_EQ(std::get<EndedJob>(events[1]).state, store::JobState::kCancelled);
  EXPECT_FALSE(Next("w1"));
  auto late = scheduler_->CompleteTask("w1", {a->key, a->attempts}, ResultsOf(a->key, 2));
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  store::Job after = *store_->GetJob(job.id);
  EXPECT_EQ(after.state, store::JobState::kCancelled);
  EXPECT_EQ(after.results_stored, 0u);
  auto again = scheduler_->CancelJob(job.id);
  ASSERT_TRUE(again.ok()) << again.status() << ": cancelling twice is a no-op";
  EXPECT_TRUE(again->already_cancelled);
  EXPECT_TRUE(scheduler_->TakeEvents().empty()) << "a no-op appends no event";
  EXPECT_EQ(again->job.state, store::JobState::kCancelled);
  EXPECT_TRUE(absl::IsNotFound(scheduler_->CancelJob(999).status()));
}

TEST_F(SchedulerTest, EveryTaskRecordsTheWorkerAndTheVersionItRegisteredWith) {
  store::Job job = Submit(Spec(1, 2));
  ASSERT_TRUE(scheduler_
                  ->RegisterWorker({.worker_id = "w1",
                                    .model = Model(kHash),
                                    .capacity = 1,
                                    .version = "ripplekv 0.1.0 (0123456789ab)"})
                  .ok());
  ASSERT_TRUE(Drain("w1", 2).job_succeeded);
  const std::vector<store::Task> tasks = *store_->ListTasks(job.id);
  ASSERT_EQ(tasks.size(), 30u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.completed_by, "w1");
    EXPECT_EQ(task.completed_by_version, "ripplekv 0.1.0 (0123456789ab)");
  }
}

TEST_F(SchedulerTest, CompletionWritesProfileEqualToAggregateOfTheResults) {
  store::Job job = Submit(Spec(4, 3));
  Register("w1");
  TaskResultsOutcome last = Drain("w1", 3);
  ASSERT_TRUE(last.job_succeeded);
  EXPECT_EQ(last.profile_version, 1u);
  store::Job done = *store_->GetJob(job.id);
  EXPECT_EQ(done.state, store::JobState::kSucceeded);
  EXPECT_EQ(done.profile_version, 1u);

  std::vector<method::TrialKl> trials;
  for (uint32_t s = 0; s < 4; ++s) {
    for (uint32_t l = 0; l < 30; ++l) {
      for (uint32_t t = 0; t < 3; ++t) trials.push_back({s, l, t, Kl(s, l, t)});
    }
  }
  auto expected = method::AggregateProfile(trials);
  ASSERT_TRUE(expected.ok());
  auto profile = method::ProfileFromJson(ProfileJson(job.id));
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_EQ(profile->layers.size(), 30u);
  for (size_t i = 0; i < 30; ++i) {
    EXPECT_EQ(std::memcmp(&profile->layers[i].mean_kl, &(*expected)[i].mean_kl, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&profile->layers[i].std_error, &(*expected)[i].std_error, sizeof(double)),
              0);
    EXPECT_EQ(profile->layers[i].per_sample_mean, (*expected)[i].per_sample_mean);
  }
  EXPECT_EQ(profile->model.hash, kHash);
  EXPECT_EQ(profile->model.n_layers, 30);
  EXPECT_EQ(profile->params.trials, 3);
  EXPECT_EQ(profile->params.samples, 4);
  EXPECT_EQ(profile->params.seed, 7u);
}

TEST_F(SchedulerTest, ProfileIsBitIdenticalWhateverOrderAndWorkers) {
  // Job 1: one worker, canonical order, whole tasks.
  store::Job one = Submit(Spec(3, 2));
  Register("solo", 1);
  Drain("solo", 2);
  const std::string json_one = ProfileJson(one.id);

  // Job 2 (same spec): three workers lease everything, then results arrive shuffled, some in
  // partial pieces in reverse trial order, some twice.
  store::Job two = Submit(Spec(3, 2));
  ASSERT_NE(one.id, two.id);
  std::vector<std::pair<std::string, store::TaskKey>> leased;
  for (const char* id : {"a", "b", "c"}) Register(id, 1000);
  for (bool any = true; any;) {
    any = false;
    for (const char* id : {"c", "a", "b"}) {
      if (auto t = Next(id)) {
        leased.push_back({id, t->key});
        any = true;
      }
    }
  }
  ASSERT_EQ(leased.size(), 90u);
  std::mt19937 rng(42);
  std::shuffle(leased.begin(), leased.end(), rng);
  for (size_t i = 0; i < leased.size(); ++i) {
    const auto& [id, key] = leased[i];
    std::vector<store::TrialResult> r = ResultsOf(key, 2);
    std::reverse(r.begin(), r.end());
    ASSERT_TRUE(scheduler_->CompleteTask(id, Held(key), r).ok());
  }
  store::Job done = *store_->GetJob(two.id);
  EXPECT_EQ(done.state, store::JobState::kSucceeded);
  EXPECT_EQ(done.results_stored, 3u * 30u * 2u);
  EXPECT_EQ(ProfileJson(two.id), json_one);  // same clock: same created_at too
}

TEST_F(SchedulerTest, ReopeningTheStoreMidJobFinishesWithTheSameProfile) {
  store::Job reference = Submit(Spec(2, 2));
  Register("w1");
  Drain("w1", 2);
  const std::string expected = ProfileJson(reference.id);

  store::Job job = Submit(Spec(2, 2));
  for (int i = 0; i < 25; ++i) {
    auto a = Next("w1");
    ASSERT_TRUE(a);
    Complete("w1", a->key, 2);
  }
  auto in_flight = Next("w1");  // leased when the scheduler "dies"
  ASSERT_TRUE(in_flight);
  Open();  // new store and scheduler over the same database
  EXPECT_EQ(store_->RecoveredLeases(), 1u);
  EXPECT_EQ(store_->GetJob(job.id)->tasks_done, 25u);
  Register("w2");
  int run_again = 0;
  while (auto a = Next("w2")) {
    ++run_again;
    Complete("w2", a->key, 2);
  }
  EXPECT_EQ(run_again, 60 - 25);
  store::Job done = *store_->GetJob(job.id);
  EXPECT_EQ(done.state, store::JobState::kSucceeded);
  EXPECT_EQ(done.profile_version, 2u);
  EXPECT_EQ(ProfileJson(job.id), expected);
}

TEST_F(SchedulerTest, JobCompleteBeforeACrashIsProfiledByTheTimerWithNoWorkerRegistered) {
  store::Job job = Submit(Spec(1, 1));
  Register("w1", /*capacity=*/1000);
  // Complete every task through the store directly, as if the scheduler died before profiling.
  int completed = 0;
  while (auto a = Next("w1")) {
    ASSERT_TRUE(store_->CompleteTask(a->key, ResultsOf(a->key, 1)).ok());
    ++completed;
  }
  ASSERT_EQ(completed, 30);
  Open();  // a new scheduler: no worker has registered with it
  EXPECT_EQ(store_->GetJob(job.id)->state, store::JobState::kRunning);
  auto tick = scheduler_->ExpireLeases();  // the model's summary was stored at registration
  ASSERT_TRUE(tick.ok()) << tick.status();
  EXPECT_EQ(tick->profiles_written, std::vector<uint32_t>{1});
  EXPECT_TRUE(tick->finish_errors.empty());
  store::Job done = *store_->GetJob(job.id);
  EXPECT_EQ(done.state, store::JobState::kSucceeded);
  EXPECT_EQ(done.profile_version, 1u);
  auto again = scheduler_->ExpireLeases();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->profiles_written.empty()) << "exactly one profile";
  EXPECT_EQ(store_->ListProfiles(kHash)->size(), 1u);
}

TEST_F(SchedulerTest, CompleteJobOfAModelNeverSeenWaitsForItsSummaryWithoutFailingRegistration) {
  // Submitted with the layer count but no worker ever registered: the summary is unknown.
  store::Job job = Submit(Spec(1, 1));
  for (uint32_t layer = 0; layer < 30; ++layer) {
    ASSERT_TRUE(store_->LeaseTask({job.id, 0, layer}, "gone", now_ + 1000).ok());
    ASSERT_TRUE(store_->CompleteTask({job.id, 0, layer}, ResultsOf({job.id, 0, layer}, 1)).ok());
  }
  Open();
  auto before = scheduler_->ExpireLeases();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->finish_errors.size(), 1u);
  EXPECT_NE(before->finish_errors[0].find("no worker holding model"), std::string::npos)
      << before->finish_errors[0];
  Register("w2");  // registering never finishes (or fails on) a job; the next tick does
  EXPECT_EQ(store_->GetJob(job.id)->state, store::JobState::kRunning);
  auto tick = scheduler_->ExpireLeases();
  ASSERT_TRUE(tick.ok()) << tick.status();
  EXPECT_EQ(tick->profiles_written, std::vector<uint32_t>{1});
  EXPECT_EQ(store_->GetJob(job.id)->state, store::JobState::kSucceeded);
}

TEST_F(SchedulerTest, ProgressReportsCountsAndAnEtaFromTheObservedRate) {
  store::Job job = Submit(Spec(1, 1));  // 30 tasks
  Register("w1");
  auto p = scheduler_->Progress(job.id);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->eta_ms, -1);
  for (int i = 0; i < 11; ++i) {
    auto a = Next("w1");
    ASSERT_TRUE(a);
    now_ += 500;  // one task every 0.5 s
    Complete("w1", a->key, 1);
  }
  auto a = Next("w1");
  ASSERT_TRUE(a);
  p = scheduler_->Progress(job.id);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->job.tasks_done, 11u);
  EXPECT_EQ(p->job.tasks_total, 30u);
  EXPECT_EQ(p->job.results_stored, 11u);
  EXPECT_EQ(p->tasks_leased, 1u);
  EXPECT_DOUBLE_EQ(p->tasks_per_second, 2.0);
  EXPECT_EQ(p->eta_ms, 19 * 500);
  EXPECT_TRUE(absl::IsNotFound(scheduler_->Progress(12345).status()));
}

TEST_F(SchedulerTest, ReRegisteringAWorkerReleasesItsOldLeases) {
  Submit(Spec(1));
  Register("w1");
  auto a = Next("w1");
  ASSERT_TRUE(a);
  // Another process with the id while this session lives is refused; a restart says --replace.
  EXPECT_TRUE(absl::IsAlreadyExists(
      scheduler_->RegisterWorker({.worker_id = "w1", .model = Model(), .instance = "other"})));
  EXPECT_EQ(store_->GetTask(a->key)->state, store::TaskState::kLeased);
  ASSERT_TRUE(
      scheduler_->RegisterWorker({.worker_id = "w1", .model = Model(), .replace = true}).ok());
  EXPECT_EQ(store_->GetTask(a->key)->state, store::TaskState::kPending);
  EXPECT_TRUE(absl::IsNotFound(scheduler_->Heartbeat("nobody", {}, {})));
  EXPECT_TRUE(absl::IsInvalidArgument(
      scheduler_->RegisterWorker({.worker_id = "x", .model = Model(kHash, 0)})));
  method::ProfileModel differs = Model();
  differs.n_layers = 31;
  EXPECT_TRUE(
      absl::IsFailedPrecondition(scheduler_->RegisterWorker({.worker_id = "y", .model = differs})));
}

}  // namespace

TEST_F(SchedulerTest, SubmitTakesTheLayerCountGivenAndChecksItAgainstWorkers) {
  // Before any worker registered: the request's count plans the job.
  auto early = scheduler_->SubmitJob({.spec = Spec(2), .model_n_layers = 30});
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(early->job.tasks_total, 2u * 30u);
  Register("w1");  // reports 30 layers
  auto wrong = scheduler_->SubmitJob({.spec = Spec(2), .model_n_layers = 12});
  ASSERT_TRUE(absl::IsInvalidArgument(wrong.status()));
  EXPECT_NE(wrong.status().message().find("model.n_layers"), std::string_view::npos);
  EXPECT_NE(wrong.status().message().find("30"), std::string_view::npos);
}

TEST_F(SchedulerTest, RefusedJobIsNoLongerOfferedToThatWorkerOnly) {
  const store::Job first = Submit(Spec(1, 2, /*priority=*/5));
  const store::Job second = Submit(Spec(1));
  Register("w1");
  Register("w2");
  auto a = Next("w1");
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->key.job, first.id);
  auto failed = scheduler_->RefuseJob("w1", Held(a->key), /*fail_if_none_left=*/true, "no data");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_FALSE(*failed);  // w2 may still read it
  // w1 now only gets the other job; the refused task went back to pending for w2.
  auto b = Next("w1");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->key.job, second.id);
  auto c = Next("w2");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->key, a->key);
  // Registering again (a restarted worker may read the data now) forgets the refusal.
  ASSERT_TRUE(
      scheduler_->RegisterWorker({.worker_id = "w1", .model = Model(), .replace = true}).ok());
  auto d = Next("w1");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key.job, first.id);
}

TEST_F(SchedulerTest, JobFailsWhenEveryWorkerOfItsModelRefusedItsData) {
  const store::Job job = Submit(Spec(2));
  Register("w1");
  Register("w2");
  Register("other", 1, kOtherHash);  // a worker of another model does not count
  auto a = Next("w1");
  ASSERT_TRUE(a.has_value());
  auto r1 = scheduler_->RefuseJob("w1", Held(a->key), true, "w1 cannot read /data/x.jsonl");
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(*r1);
  auto b = Next("w2");
  ASSERT_TRUE(b.has_value());
  auto r2 = scheduler_->RefuseJob("w2", Held(b->key), true, "w2 cannot read /data/x.jsonl");
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(*r2);
  auto stored = store_->GetJob(job.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, store::JobState::kFailed);
  EXPECT_NE(stored->error.find("w2 cannot read"), std::string::npos) << stored->error;
  // A model-hash refusal (fail_if_none_left false) never fails the job on its own.
  const store::Job other = Submit(Spec(1));
  auto c = Next("w1");
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->key.job, other.id);
  auto r3 = scheduler_->RefuseJob("w1", Held(c->key), false, "hash");
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(*r3);
  EXPECT_EQ(store_->GetJob(other.id)->state, store::JobState::kRunning);
}

// The pending-task index must follow every transition: random leases, completions, give-backs,
// disconnects, expiries and a store reopen never hand out a task twice at once or lose one, and
// the job ends with the same profile as an undisturbed run.
TEST_F(SchedulerTest, RandomTransitionsNeverLoseOrDoubleLeaseATask) {
  const store::Job reference_job = Submit(Spec(3));
  Register("ref");
  Drain("ref", 2);
  const std::string reference = ProfileJson(reference_job.id);
  ASSERT_FALSE(reference.empty());
  ASSERT_TRUE(scheduler_->WorkerGone("ref").ok());

  // Leases shorter than the heartbeat timeout, so both expiry paths run: leases of live workers
  // past their deadline, and every lease of a worker dropped for silence.
  // Every transition here may cost an attempt; the attempt limit has its own test.
  SchedulerOptions options{.lease_duration_ms = 1'000, .heartbeat_timeout_ms = 30'000};
  options.max_attempts = 1'000'000;
  options.faults.quarantine_failures = 1'000'000;  // quarantine has tests of its own
  Open(options);
  const store::Job job = Submit(Spec(3));
  std::mt19937_64 rng(5);
  const std::vector<std::string> ids = {"a", "b", "c"};
  for (const auto& id : ids) Register(id, 2);
  std::map<store::TaskKey, std::string> leased;  // what the test believes is leased, by whom
  bool finished = false;
  for (int step = 0; step < 5000 && !finished; ++step) {
    if (step == 150) {  // one restart: leased tasks return to pending, the index is rebuilt
      Open(options);
      leased.clear();
      for (const auto& w : ids) Register(w, 2);
    }
    const std::string& id = ids[rng() % ids.size()];
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2: {
        auto a = scheduler_->NextTask(id);
        if (absl::IsNotFound(a.status())) {
          Register(id, 2);
          break;
        }
        ASSERT_TRUE(a.ok()) << a.status();
        if (!a->has_value()) break;
        const store::TaskKey key = (*a)->key;
        ASSERT_FALSE(leased.contains(key)) << "task leased twice at once";
        auto task = store_->GetTask(key);
        ASSERT_TRUE(task.ok());
        ASSERT_EQ(task->state, store::TaskState::kLeased);
        leased[key] = id;
        break;
      }
      case 3:
      case 4: {
        for (auto it = leased.begin(); it != leased.end(); ++it) {
          if (it->second != id) continue;
          auto out = scheduler_->CompleteTask(id, Held(it->first), ResultsOf(it->first, 2));
          ASSERT_TRUE(out.ok()) << out.status();
          finished = out->job_succeeded;
          leased.erase(it);
          break;
        }
        break;
      }
      case 5: {
        for (auto it = leased.begin(); it != leased.end(); ++it) {
          if (it->second != id) continue;
          ASSERT_TRUE(scheduler_->ReleaseTask(id, Held(it->first)).ok());
          leased.erase(it);
          break;
        }
        break;
      }
      case 6: {
        if (scheduler_->WorkerGone(id).ok()) {
          std::erase_if(leased, [&](const auto& e) { return e.second == id; });
        }
        break;
      }
      case 7: {
        now_ += rng() % 2 == 0 ? 2'000 : 200'000;  // past the leases, or also the heartbeats
        auto expired = scheduler_->ExpireLeases();
        ASSERT_TRUE(expired.ok());
        for (const auto& id2 : expired->dropped_workers) Register(id2, 2);
        leased.clear();
        break;
      }
    }
  }
  ASSERT_TRUE(finished) << "the job did not finish";
  auto done = store_->GetJob(job.id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, store::JobState::kSucceeded);
  EXPECT_EQ(done->results_stored, 3u * 30u * 2u);
  // Same numbers as the undisturbed run (created_at differs: compare the layers).
  auto layers = [](const std::string& json) {
    const size_t from = json.find("\"layers\"");
    return json.substr(from, json.find("\"created_at\"") - from);
  };
  EXPECT_EQ(layers(ProfileJson(job.id)), layers(reference));
}

TEST_F(SchedulerTest, TheWorkersDataDescriptionBecomesTheProfilesDataSource) {
  const store::Job job = Submit(Spec(1));
  Register("w1");
  auto same = scheduler_->DescribeJobData(job.id, "sherlock-holmes: 1 sample, fingerprint 42");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(*same);
  same = scheduler_->DescribeJobData(job.id, "another tokenizer's view");
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(*same);  // differs from the first report, which is kept
  Drain("w1", 2);
  const std::string json = ProfileJson(job.id);
  EXPECT_NE(json.find("\"data_source\": \"sherlock-holmes: 1 sample, fingerprint 42\""),
            std::string::npos)
      << json;
}

// ---- What the adapters ask of the core: created, listings, typed profiles, budget maps ----

// A valid profile of an `n_layers`-layer model that measured `layers` only.
method::SensitivityProfile ProfileOf(const std::string& hash, int64_t n_layers,
                                     const std::vector<int64_t>& layers) {
  method::SensitivityProfile p;
  p.model = Model(hash, n_layers);
  p.params.alpha = 0.5;
  p.params.trials = 2;
  p.params.seed = 7;
  p.params.samples = 1;
  p.params.context_len = 64;
  p.params.probe_len = 8;
  p.params.layers = layers;
  p.params.data_source = "test data";
  for (int64_t l : layers) {
    const double kl = 0.1 * static_cast<double>(l + 1);
    p.layers.push_back({.layer = l, .mean_kl = kl, .count = 2, .per_sample_mean = {kl}});
  }
  p.created_at = "2025-01-31T12:00:00Z";
  p.tool_version = "ripplekv 0.1.0";
  return p;
}

std::vector<store::JobId> IdsOf(const JobPage& page) {
  std::vector<store::JobId> ids;
  for (const store::Job& job : page.jobs) ids.push_back(job.id);
  return ids;
}

TEST_F(SchedulerTest, SubmitSaysWhetherItCreatedTheJob) {
  store::JobSpec spec = Spec(2);
  spec.idempotency_key = "k1";
  auto first = scheduler_->SubmitJob({.spec = spec, .model_n_layers = 30});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  auto again = scheduler_->SubmitJob({.spec = spec, .model_n_layers = 30});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created) << "the key names the first job";
  EXPECT_EQ(again->job.id, first->job.id);
  // Without a key every submit is a new job.
  auto a = scheduler_->SubmitJob({.spec = Spec(2), .model_n_layers = 30});
  auto b = scheduler_->SubmitJob({.spec = Spec(2), .model_n_layers = 30});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->created);
  EXPECT_TRUE(b->created);
  EXPECT_NE(a->job.id, b->job.id);
}

TEST_F(SchedulerTest, ListJobsFiltersAndPagesNewestFirst) {
  std::vector<store::JobId> ids;  // oldest first
  for (int i = 0; i < 5; ++i) {
    store::JobSpec spec = Spec(1);
    if (i == 3) spec.model_hash = kOtherHash;
    ids.push_back(Submit(spec).id);
    now_ += 10;
  }
  ids.push_back(Submit(Spec(1)).id);  // same create time as the next: the higher id first
  ids.push_back(Submit(Spec(1)).id);
  ASSERT_TRUE(scheduler_->CancelJob(ids[1]).ok());

  auto all = scheduler_->ListJobs({});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(IdsOf(*all),
            (std::vector<store::JobId>{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}));
  EXPECT_TRUE(all->next_page_token.empty());

  auto cancelled = scheduler_->ListJobs({.states = {store::JobState::kCancelled}});
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(IdsOf(*cancelled), std::vector<store::JobId>{ids[1]});
  auto other = scheduler_->ListJobs({.model_hash = kOtherHash});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(IdsOf(*other), std::vector<store::JobId>{ids[3]});
  auto pending_of_model = scheduler_->ListJobs(
      {.states = {store::JobState::kPending, store::JobState::kRunning}, .model_hash = kHash});
  ASSERT_TRUE(pending_of_model.ok());
  EXPECT_EQ(IdsOf(*pending_of_model),
            (std::vector<store::JobId>{ids[6], ids[5], ids[4], ids[2], ids[0]}));

  // Pages of 3 over 7 jobs: 3 + 3 + 1, the tokens chaining them, nothing after the last.
  JobFilter paged{.page = {.page_size = 3}};
  std::vector<store::JobId> seen;
  std::vector<size_t> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = scheduler_->ListJobs(paged);
    ASSERT_TRUE(page.ok()) << page.status();
    sizes.push_back(page->jobs.size());
    for (store::JobId id : IdsOf(*page)) seen.push_back(id);
    if (page->next_page_token.empty()) break;
    paged.page.page_token = page->next_page_token;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 1}));
  EXPECT_EQ(seen, IdsOf(*all));
  // A page that ends exactly at the last job has no next page.
  auto exact = scheduler_->ListJobs({.page = {.page_size = 7}});
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->jobs.size(), 7u);
  EXPECT_TRUE(exact->next_page_token.empty());
  // A token past the end is an empty last page.
  auto past = scheduler_->ListJobs({.page = {.page_token = "100"}});
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->jobs.empty());
  EXPECT_TRUE(past->next_page_token.empty());
}

TEST_F(SchedulerTest, ListingsRefuseABadPageTokenOrSizeNamingTheField) {
  Submit(Spec(1));
  for (const std::string token : {"x1", "-1", "1.5", "99999999999999999999999"}) {
    auto page = scheduler_->ListJobs({.page = {.page_token = token}});
    ASSERT_TRUE(absl::IsInvalidArgument(page.status())) << token << ": " << page.status();
    EXPECT_NE(page.status().message().find("page_token"), std::string_view::npos);
    auto profiles = scheduler_->ListProfiles("", {.page_token = token});
    ASSERT_TRUE(absl::IsInvalidArgument(profiles.status())) << token;
    EXPECT_NE(profiles.status().message().find("page_token"), std::string_view::npos);
  }
  auto negative = scheduler_->ListJobs({.page = {.page_size = -1}});
  ASSERT_TRUE(absl::IsInvalidArgument(negative.status()));
  EXPECT_NE(negative.status().message().find("page_size"), std::string_view::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(scheduler_->ListProfiles("", {.page_size = -1}).status()));
}

TEST_F(SchedulerTest, ListProfilesPagesByHashThenNewestVersion) {
  // kHash "5a6b7c" sorts before kOtherHash "ffff00".
  for (const char* hash : {kOtherHash, kHash, kHash, kHash}) {
    auto json = method::ProfileToJson(ProfileOf(hash, 2, {0, 1}));
    ASSERT_TRUE(json.ok()) << json.status();
    ASSERT_TRUE(store_->PutProfileVersion(hash, *json).ok());
  }
  std::vector<std::pair<std::string, uint32_t>> seen;
  PageRequest page{.page_size = 2};
  std::vector<size_t> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    auto listed = scheduler_->ListProfiles("", page);
    ASSERT_TRUE(listed.ok()) << listed.status();
    sizes.push_back(listed->profiles.size());
    for (const StoredProfile& p : listed->profiles) {
      seen.emplace_back(p.model_hash, p.version);
      EXPECT_EQ(p.profile.model.hash, p.model_hash);
      EXPECT_EQ(p.job, store::kNoJob);
    }
    if (listed->next_page_token.empty()) break;
    page.page_token = listed->next_page_token;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2}));
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint32_t>>{
                      {kHash, 3}, {kHash, 2}, {kHash, 1}, {kOtherHash, 1}}));
  auto of_one = scheduler_->ListProfiles(kOtherHash, {});
  ASSERT_TRUE(of_one.ok());
  ASSERT_EQ(of_one->profiles.size(), 1u);
  EXPECT_EQ(of_one->profiles[0].model_hash, kOtherHash);
}

TEST_F(SchedulerTest, GetProfileParsesTheStoredVersionAndNamesACorruptOneAsDataLoss) {
  auto json = method::ProfileToJson(ProfileOf(kHash, 2, {0, 1}));
  ASSERT_TRUE(json.ok());
  ASSERT_TRUE(store_->PutProfileVersion(kHash, *json).ok());
  // Valid JSON (the store checks that much) but not a profile.
  ASSERT_TRUE(store_->PutProfileVersion(kHash, R"({"schema_version": 1, "model": 7})").ok());

  auto first = scheduler_->GetProfile(kHash, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->version, 1u);
  EXPECT_EQ(first->profile.layers.size(), 2u);
  EXPECT_GT(first->created_at_ms, 0);

  auto latest = scheduler_->GetProfile(kHash);
  ASSERT_TRUE(absl::IsDataLoss(latest.status())) << latest.status();
  EXPECT_NE(latest.status().message().find("stored profile 5a6b7c version 2"),
            std::string_view::npos)
      << latest.status();
  EXPECT_TRUE(absl::IsDataLoss(scheduler_->ListProfiles(kHash, {}).status()));
  // A page that does not reach the corrupt version parses only its own documents.
  auto skip = scheduler_->ListProfiles(kHash, {.page_size = 1, .page_token = "1"});
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(skip->profiles.at(0).version, 1u);
  EXPECT_TRUE(absl::IsNotFound(scheduler_->GetProfile(kHash, 9).status()));
  EXPECT_TRUE(absl::IsNotFound(scheduler_->GetProfile(kOtherHash).status()));
}

TEST_F(SchedulerTest, BudgetMapNeedsAProfileOfEveryLayerAndOptionsThatFit) {
  auto complete = method::ProfileToJson(ProfileOf(kHash, 3, {0, 1, 2}));
  auto partial = method::ProfileToJson(ProfileOf(kHash, 3, {0, 2}));
  ASSERT_TRUE(complete.ok() && partial.ok());
  ASSERT_TRUE(store_->PutProfileVersion(kHash, *complete).ok());  // version 1
  ASSERT_TRUE(store_->PutProfileVersion(kHash, *partial).ok());   // version 2

  method::BudgetOptions options;
  options.average_tokens = 100;
  auto map = scheduler_->GetBudgetMap(kHash, 1, options);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->profile.version, 1u);
  ASSERT_EQ(map->map.tokens.size(), 3u);
  EXPECT_EQ(map->map.tokens[0] + map->map.tokens[1] + map->map.tokens[2], 300);
  EXPECT_LT(map->map.tokens[0], map->map.tokens[2]) << "layer 2 is the more sensitive";

  // The latest version misses layer 1: the request is fine, the profile cannot serve it.
  auto missing = scheduler_->GetBudgetMap(kHash, store::kLatestVersion, options);
  ASSERT_TRUE(absl::IsFailedPrecondition(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("version 2"), std::string_view::npos)
      << missing.status();
  EXPECT_NE(missing.status().message().find("layer 1"), std::string_view::npos) << missing.status();

  // Options that do not fit a complete profile stay the request's fault.
  method::BudgetOptions too_long = options;
  too_long.max_context = 50;  // every layer's budget is near 100
  EXPECT_TRUE(absl::IsInvalidArgument(scheduler_->GetBudgetMap(kHash, 1, too_long).status()));
  method::BudgetOptions infeasible = options;
  infeasible.min_tokens = 200;  // 3 x 200 > 300
  EXPECT_TRUE(absl::IsInvalidArgument(scheduler_->GetBudgetMap(kHash, 1, infeasible).status()));
  EXPECT_TRUE(absl::IsNotFound(scheduler_->GetBudgetMap(kOtherHash, 0, options).status()));
}

TEST_F(SchedulerTest, BudgetMapOfAResponseProfileIsItsResponseAllocation) {
  // Three layers measured as H2O's response at 16, 32 and the full 64-token context; layer 1
  // loses the most at every budget, layer 2 the least.
  method::SensitivityProfile p = ProfileOf(kHash, 3, {0, 1, 2});
  p.params.objective = method::Objective::kResponse;
  p.params.selector = method::ResponseSelector::kH2o;
  p.params.budgets = {16, 32, 64};
  p.params.trials = 3;
  const std::vector<std::vector<double>> kl = {{0.4, 0.1, 0.0}, {0.9, 0.3, 0.0}, {0.2, 0.05, 0.0}};
  for (size_t l = 0; l < 3; ++l) {
    p.layers[l].count = 3;
    p.layers[l].mean_kl = (kl[l][0] + kl[l][1]) / 3.0;
    p.layers[l].per_sample_mean = {p.layers[l].mean_kl};
    for (size_t t = 0; t < 3; ++t) {
      p.layers[l].response.push_back({.budget = p.params.budgets[t], .mean_kl = kl[l][t]});
    }
  }
  auto json = method::ProfileToJson(p);
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_TRUE(store_->PutProfileVersion(kHash, *json).ok());

  method::BudgetOptions options;
  options.average_tokens = 30;
  auto map = scheduler_->GetBudgetMap(kHash, 1, options);
  ASSERT_TRUE(map.ok()) << map.status();
  auto expected = method::ComputeBudgetMap(p, options);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(map->map.tokens, expected->tokens);
  EXPECT_EQ(map->map.objective, method::Objective::kResponse);
  EXPECT_EQ(map->map.selector, method::ResponseSelector::kH2o);
  EXPECT_EQ(map->map.tokens[0] + map->map.tokens[1] + map->map.tokens[2], 90);
  EXPECT_GT(map->map.tokens[1], map->map.tokens[2]) << "layer 1 loses the most";
  // A context length that caps every layer below the average cannot be served: the request's
  // fault, not the stored profile's.
  method::BudgetOptions too_short = options;
  too_short.max_context = 25;  // 3 x 25 < 90
  EXPECT_TRUE(absl::IsInvalidArgument(scheduler_->GetBudgetMap(kHash, 1, too_short).status()));
}

TEST_F(SchedulerTest, PerHeadMapOfAProfileWithoutHeadCurvesIsTheProfilesFault) {
  // A per-layer noise profile: it gives per-layer maps, but no head curves for a per-head one.
  method::SensitivityProfile p = ProfileOf(kHash, 3, {0, 1, 2});
  auto json = method::ProfileToJson(p);
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_TRUE(store_->PutProfileVersion(kHash, *json).ok());
  method::BudgetOptions options;
  options.average_tokens = 100;
  ASSERT_TRUE(scheduler_->GetBudgetMap(kHash, 1, options).ok());
  options.per_head = true;
  auto map = scheduler_->GetBudgetMap(kHash, 1, options);
  ASSERT_TRUE(absl::IsFailedPrecondition(map.status())) << map.status();
  EXPECT_NE(map.status().message().find(std::string("profile ") + kHash + " version 1: "),
            std::string_view::npos)
      << map.status();
}

TEST_F(SchedulerTest, AssignmentsCarryTheJobsSpecAndJobDataEndsWithTheJob) {
  store::JobSpec spec = Spec(1, /*trials=*/3);
  spec.data_inline = "some calibration text";
  spec.data_format = store::DataFormat::kText;
  const store::Job job = Submit(spec);
  Register("w1");
  auto a = Next("w1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->model_hash, kHash);
  EXPECT_EQ(a->params, spec.params);
  EXPECT_EQ(a->trials, 3u);

  auto data = scheduler_->JobData("w1", job.id);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->data_inline, "some calibration text") << "workers get the inline data";
  ASSERT_TRUE(scheduler_->CancelJob(job.id).ok());
  auto gone = scheduler_->JobData("w1", job.id);
  ASSERT_TRUE(absl::IsFailedPrecondition(gone.status())) << gone.status();
  EXPECT_NE(gone.status().message().find("cancelled"), std::string_view::npos) << gone.status();
  EXPECT_TRUE(absl::IsNotFound(scheduler_->JobData("w1", 999).status()));
}

}  // namespace ripplekv::scheduler
