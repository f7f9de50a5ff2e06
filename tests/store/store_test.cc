#include "store/store.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::store {
namespace {

using ::ripplekv::store::testing::Kl;
using ::ripplekv::store::testing::MakeSpec;
using ::ripplekv::store::testing::StoreFixture;
using ::ripplekv::store::testing::TempDir;
using ::ripplekv::store::testing::Trials;
using ::testing::HasSubstr;

std::vector<PlannedTask> Grid(uint32_t samples, uint32_t layers) {
  std::vector<PlannedTask> tasks;
  for (uint32_t s = 0; s < samples; ++s) {
    for (uint32_t l = 0; l < layers; ++l) tasks.push_back({.sample = s, .layer = l});
  }
  return tasks;
}

class StoreTest : public StoreFixture {
 protected:
  // A job over samples x layers, created and checked.
  Job NewJob(uint32_t samples = 2, uint32_t layers = 3, JobSpec spec = MakeSpec()) {
    StatusOr<CreateJobOutcome> outcome = store_->CreateJob(spec, Grid(samples, layers));
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job : Job{};
  }

  // Leases and completes `key` with all its trials.
  void Finish(const TaskKey& key, uint32_t trials = 2) {
    ASSERT_TRUE(store_->LeaseTask(key, "w", now_ + 1000).ok());
    StatusOr<ResultWriteOutcome> done = store_->CompleteTask(key, Trials(key, 0, trials));
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_TRUE(done->task_completed);
  }
};

// ---- Jobs ----

TEST_F(StoreTest, CreateJobAllocatesIdsFromOneAndStoresPendingTasksInCanonicalOrder) {
  StatusOr<CreateJobOutcome> first =
      store_->CreateJob(MakeSpec(), std::vector<PlannedTask>{{.sample = 1, .layer = 0},
                                                             {.sample = 0, .layer = 300},
                                                             {.sample = 0, .layer = 2}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->job.id, 1u);
  EXPECT_EQ(first->job.state, JobState::kPending);
  EXPECT_EQ(first->job.tasks_total, 3u);
  EXPECT_EQ(first->job.created_at_ms, now_);
  EXPECT_EQ(NewJob().id, 2u);

  StatusOr<Job> got = store_->GetJob(1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, first->job);

  StatusOr<std::vector<Task>> tasks = store_->ListTasks(1);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ((*tasks)[0].key, (TaskKey{.job = 1, .sample = 0, .layer = 2}));
  EXPECT_EQ((*tasks)[1].key, (TaskKey{.job = 1, .sample = 0, .layer = 300}));
  EXPECT_EQ((*tasks)[2].key, (TaskKey{.job = 1, .sample = 1, .layer = 0}));
  for (const Task& t : *tasks) {
    EXPECT_EQ(t.state, TaskState::kPending);
    EXPECT_EQ(t.attempts, 0u);
  }
}

TEST_F(StoreTest, FirstDataDescriptionWinsAndSurvivesReopen) {
  const Job job = NewJob();
  StatusOr<Job> described = store_->SetDataDescription(job.id, "book@0: 2 samples, fp 1");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->data_description, "book@0: 2 samples, fp 1");
  described = store_->SetDataDescription(job.id, "something else");
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->data_description, "book@0: 2 samples, fp 1");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->SetDataDescription(job.id, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->SetDataDescription(job.id, "\xff").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->SetDataDescription(job.id + 7, "x").status()));
  Reopen();
  EXPECT_EQ(store_->GetJob(job.id)->data_description, "book@0: 2 samples, fp 1");
}

TEST_F(StoreTest, FirstModelSummaryWinsAndSurvivesReopen) {
  const std::string hash = "9f86d0";
  StatusOr<std::string> first = store_->PutModelSummary(hash, R"({"n_layers": 30})");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, R"({"n_layers": 30})");
  StatusOr<std::string> second = store_->PutModelSummary(hash, R"({"n_layers": 31})");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, R"({"n_layers": 30})") << "the first report is kept";
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PutModelSummary(hash, "{not json").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PutModelSummary("", "{}").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(store_->PutModelSummary(hash, std::string(70'000, ' ')).status()));
  ASSERT_TRUE(store_->PutModelSummary("00aa", "{}").ok());
  Reopen();
  StatusOr<std::vector<std::pair<std::string, std::string>>> all = store_->ListModelSummaries();
  ASSERT_TRUE(all.ok()) << all.status();
  const std::vector<std::pair<std::string, std::string>> expected = {{"00aa", "{}"},
                                                                     {hash, R"({"n_layers": 30})"}};
  EXPECT_EQ(*all, expected);
}

TEST_F(StoreTest, JobSpecSurvivesReopenExactly) {
  JobSpec spec = MakeSpec("9f86d0", 5);
  spec.params = {.mode = method::PerturbMode::kPrefill,
                 .alpha = 0.1,
                 .trials = 5,
                 .seed = 0xFFFFFFFFFFFFFFFFull,
                 .samples = 3,
                 .context_len = 700,
                 .probe_len = 33,
                 .layers = {1, 4}};
  spec.data_inline = "{\"text\": \"é\"}\n";
  spec.priority = -7;
  spec.idempotency_key = "k1";
  const Job job = NewJob(3, 2, spec);
  Reopen();
  StatusOr<Job> got = store_->GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->spec, spec);
  EXPECT_EQ(*got, job);

  // Listings leave the inline data out; the record rewritten per task completion excludes it.
  StatusOr<std::vector<Job>> listed = store_->ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE((*listed)[0].spec.data_inline.empty());
  ASSERT_TRUE(store_->LeaseTask({.job = job.id, .sample = 0, .layer = 0}, "w", 10).ok());
  EXPECT_EQ(store_->GetJob(job.id)->spec.data_inline, spec.data_inline);
}

TEST_F(StoreTest, IdempotencyKeyReturnsTheExistingJobAndRefusesADifferentSpec) {
  JobSpec spec = MakeSpec();
  spec.idempotency_key = "submit-1";
  const Job job = NewJob(2, 2, spec);
  now_ += 50;
  Reopen();  // the key is durable, not an in-memory cache

  StatusOr<CreateJobOutcome> again = store_->CreateJob(spec, Grid(2, 2));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job, job);

  spec.params.seed = 99;
  StatusOr<CreateJobOutcome> other = store_->CreateJob(spec, Grid(2, 2));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("'submit-1' already names job 1"));
  EXPECT_EQ(store_->ListJobs()->size(), 1u);
}

TEST_F(StoreTest, CreateJobRejectsWhatWouldBreakTheStoresInvariants) {
  auto code = [&](const JobSpec& spec, std::vector<PlannedTask> tasks) {
    return store_->CreateJob(spec, tasks).status().code();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(MakeSpec(), {}), kInvalid);
  EXPECT_EQ(code(MakeSpec(), {{.sample = 1, .layer = 2}, {.sample = 1, .layer = 2}}), kInvalid);
  EXPECT_EQ(code(MakeSpec("", 2), Grid(1, 1)), kInvalid);
  EXPECT_EQ(code(MakeSpec(std::string("a\0b", 3), 2), Grid(1, 1)), kInvalid);
  EXPECT_EQ(code(MakeSpec("ab", 0), Grid(1, 1)), kInvalid);
  JobSpec bad_utf8 = MakeSpec();
  bad_utf8.model_path = "\xff";
  EXPECT_EQ(code(bad_utf8, Grid(1, 1)), kInvalid);
  JobSpec long_key = MakeSpec();
  long_key.idempotency_key = std::string(1025, 'k');
  EXPECT_EQ(code(long_key, Grid(1, 1)), kInvalid);

  options_.max_value_bytes = 4096;
  options_.max_tasks_per_job = 10;
  Reopen();
  JobSpec big = MakeSpec();
  big.data_inline = std::string(5000, 'x');
  const Status too_big = store_->CreateJob(big, Grid(1, 1)).status();
  EXPECT_EQ(too_big.code(), kInvalid);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("max_value_bytes"));
  EXPECT_EQ(code(MakeSpec(), Grid(3, 4)), kInvalid);
  EXPECT_TRUE(store_->ListJobs()->empty());
}

TEST_F(StoreTest, UnknownJobsAndTasksAreNotFound) {
  NewJob(1, 1);
  EXPECT_EQ(store_->GetJob(7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListTasks(7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListResults(7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CountResults(7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateJobState(7, JobState::kCancelled).status().code(),
            absl::StatusCode::kNotFound);
  const TaskKey missing{.job = 1, .sample = 0, .layer = 5};
  EXPECT_EQ(store_->GetTask(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LeaseTask(missing, "w", 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListTaskResults(missing).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, ListJobsOrdersByPriorityThenAgeAndFiltersActive) {
  auto create = [&](int32_t priority) {
    JobSpec spec = MakeSpec();
    spec.priority = priority;
    now_ += 10;
    return NewJob(1, 1, spec).id;
  };
  const JobId low = create(0), high_old = create(5), high_new = create(5), mid = create(1);
  ASSERT_TRUE(store_->UpdateJobState(mid, JobState::kCancelled, "user").ok());
  StatusOr<std::vector<Job>> all = store_->ListJobs();
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<JobId> order;
  for (const Job& j : *all) order.push_back(j.id);
  EXPECT_EQ(order, (std::vector<JobId>{high_old, high_new, mid, low}));

  StatusOr<std::vector<Job>> active = store_->ListJobs({.active_only = true});
  ASSERT_TRUE(active.ok()) << active.status();
  order.clear();
  for (const Job& j : *active) order.push_back(j.id);
  EXPECT_EQ(order, (std::vector<JobId>{high_old, high_new, low}));
}

TEST_F(StoreTest, IllegalJobTransitionsAreFailedPreconditionAndChangeNothing) {
  const Job job = NewJob(1, 1);
  auto move = [&](JobState to) { return store_->UpdateJobState(job.id, to).status(); };
  EXPECT_EQ(move(JobState::kPending).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(move(JobState::kSucceeded).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(move(JobState::kRunning).ok());
  EXPECT_EQ(move(JobState::kRunning).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(move(JobState::kPending).code(), absl::StatusCode::kFailedPrecondition);
  const Status early = move(JobState::kSucceeded);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(early.message()), HasSubstr("0 of 1 tasks done"));

  now_ += 5;
  StatusOr<Job> failed = store_->UpdateJobState(job.id, JobState::kFailed, "out of memory");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->error, "out of memory");
  EXPECT_EQ(failed->updated_at_ms, now_);
  for (JobState to : {JobState::kPending, JobState::kRunning, JobState::kSucceeded,
                      JobState::kFailed, JobState::kCancelled}) {
    const Status s = move(to);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << JobStateName(to);
    EXPECT_THAT(std::string(s.message()), HasSubstr("job 1 is failed; it cannot become"));
  }
  EXPECT_EQ(*store_->GetJob(job.id), *failed);
}

TEST_F(StoreTest, RunningJobSucceedsOnceEveryTaskIsDone) {
  const Job job = NewJob(1, 2);
  Finish({.job = job.id, .sample = 0, .layer = 0});
  EXPECT_EQ(store_->UpdateJobState(job.id, JobState::kSucceeded).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Finish({.job = job.id, .sample = 0, .layer = 1});
  StatusOr<Job> done = store_->UpdateJobState(job.id, JobState::kSucceeded);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, JobState::kSucceeded);
  EXPECT_EQ(done->tasks_done, 2u);
}

// ---- Rounds (until_stable) ----

JobSpec UntilStableSpec(uint32_t samples = 2, uint32_t max_samples = 6) {
  JobSpec spec = MakeSpec();
  spec.params.samples = samples;
  spec.params.until_stable = true;
  spec.params.max_samples = max_samples;
  return spec;
}

std::vector<PlannedTask> Round(uint32_t first, uint32_t end, uint32_t layers) {
  std::vector<PlannedTask> tasks;
  for (uint32_t s = first; s < end; ++s) {
    for (uint32_t l = 0; l < layers; ++l) tasks.push_back({.sample = s, .layer = l});
  }
  return tasks;
}

TEST_F(StoreTest, ExtendJobAddsTheNextRoundAsPendingTasksAndClearsTheDescription) {
  const Job job = NewJob(2, 3, UntilStableSpec());
  EXPECT_EQ(job.samples_planned, 2u);
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t l = 0; l < 3; ++l) Finish({.job = job.id, .sample = s, .layer = l});
  }
  ASSERT_TRUE(store_->SetDataDescription(job.id, "book@0: 2 samples, fp 1").ok());
  now_ += 5;
  StatusOr<Job> extended = store_->ExtendJob(job.id, 4, Round(2, 4, 3));
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_EQ(extended->state, JobState::kRunning);
  EXPECT_EQ(extended->samples_planned, 4u);
  EXPECT_EQ(extended->tasks_total, 12u);
  EXPECT_EQ(extended->tasks_done, 6u);
  EXPECT_EQ(extended->results_stored, 12u);
  EXPECT_TRUE(extended->data_description.empty());
  EXPECT_EQ(extended->updated_at_ms, now_);
  EXPECT_EQ(extended->spec.params.samples, 2u);  // the spec stays as submitted

  Reopen();
  StatusOr<Job> got = store_->GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *extended);
  StatusOr<std::vector<Task>> tasks = store_->ListTasks(job.id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 12u);
  for (const Task& t : *tasks) {
    EXPECT_EQ(t.state, t.key.sample < 2 ? TaskState::kDone : TaskState::kPending) << t.key.sample;
  }
  // The new round's description is recorded afresh; once its tasks are done the job succeeds.
  ASSERT_EQ(store_->SetDataDescription(job.id, "book@0: 4 samples, fp 2")->data_description,
            "book@0: 4 samples, fp 2");
  EXPECT_EQ(store_->UpdateJobState(job.id, JobState::kSucceeded).status().code(),
            absl::StatusCode::kFailedPrecondition);
  for (uint32_t s = 2; s < 4; ++s) {
    for (uint32_t l = 0; l < 3; ++l) Finish({.job = job.id, .sample = s, .layer = l});
  }
  EXPECT_TRUE(store_->UpdateJobState(job.id, JobState::kSucceeded).ok());
}

TEST_F(StoreTest, ExtendJobRefusesWhatIsNotTheEndOfARoundAndChangesNothing) {
  const Job plain = NewJob(2, 1);  // not until_stable
  const Job job = NewJob(2, 1, UntilStableSpec(2, 5));
  auto code = [&](JobId id, uint32_t samples, std::vector<PlannedTask> tasks) {
    return store_->ExtendJob(id, samples, tasks).status().code();
  };
  constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(job.id, 4, Round(2, 4, 1)), kPrecondition);  // pending, nothing done
  Finish({.job = job.id, .sample = 0, .layer = 0});
  EXPECT_EQ(code(job.id, 4, Round(2, 4, 1)), kPrecondition);  // a task left
  Finish({.job = job.id, .sample = 1, .layer = 0});
  Finish({.job = plain.id, .sample = 0, .layer = 0});
  Finish({.job = plain.id, .sample = 1, .layer = 0});
  EXPECT_EQ(code(plain.id, 4, Round(2, 4, 1)), kPrecondition);  // not until_stable
  EXPECT_EQ(code(job.id, 2, Round(2, 4, 1)), kPrecondition);    // no more samples
  EXPECT_EQ(code(job.id, 6, Round(2, 6, 1)), kPrecondition);    // past max_samples
  EXPECT_EQ(code(job.id, 4, {}), kInvalid);
  EXPECT_EQ(code(job.id, 4, Round(1, 4, 1)), kInvalid);  // a sample of the last round
  EXPECT_EQ(code(job.id, 4, {{.sample = 2, .layer = 0}, {.sample = 2, .layer = 0}}), kInvalid);
  EXPECT_EQ(code(job.id + 9, 4, Round(2, 4, 1)), absl::StatusCode::kNotFound);
  StatusOr<Job> unchanged = store_->GetJob(job.id);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->samples_planned, 2u);
  EXPECT_EQ(unchanged->tasks_total, 2u);
  EXPECT_EQ(store_->ListTasks(job.id)->size(), 2u);
  // The last round may be shorter than the others: up to max_samples exactly.
  ASSERT_TRUE(store_->ExtendJob(job.id, 4, Round(2, 4, 1)).ok());
  Finish({.job = job.id, .sample = 2, .layer = 0});
  Finish({.job = job.id, .sample = 3, .layer = 0});
  StatusOr<Job> last = store_->ExtendJob(job.id, 5, Round(4, 5, 1));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->samples_planned, 5u);
  ASSERT_TRUE(store_->UpdateJobState(job.id, JobState::kCancelled).ok());
  EXPECT_EQ(code(job.id, 5, Round(5, 5, 1)), kInvalid);
}

TEST_F(StoreTest, CancellingReleasesLeasesAndStopsLeasingAndResults) {
  const Job job = NewJob(1, 2);
  const TaskKey key{.job = job.id, .sample = 0, .layer = 1};
  ASSERT_TRUE(store_->LeaseTask(key, "w1", now_ + 100).ok());
  ASSERT_TRUE(store_->UpdateJobState(job.id, JobState::kCancelled, "by user").ok());
  StatusOr<Task> task = store_->GetTask(key);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, TaskState::kPending);
  EXPECT_TRUE(task->lease_owner.empty());
  EXPECT_EQ(store_->LeaseTask(key, "w1", now_ + 100).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->CompleteTask(key, Trials(key, 0, 2)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->PutResults(Trials(key, 0, 1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_->CountResults(job.id), 0u);
}

// ---- Leases ----

TEST_F(StoreTest, LeaseTaskLeasesAPendingTaskAndStartsItsJob) {
  const Job job = NewJob();
  const TaskKey key{.job = job.id, .sample = 1, .layer = 2};
  now_ += 7;
  StatusOr<Task> leased = store_->LeaseTask(key, "worker-a", 5000);
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_EQ(leased->state, TaskState::kLeased);
  EXPECT_EQ(leased->lease_owner, "worker-a");
  EXPECT_EQ(leased->lease_deadline_ms, 5000);
  EXPECT_EQ(leased->attempts, 1u);
  EXPECT_EQ(*store_->GetTask(key), *leased);
  StatusOr<Job> running = store_->GetJob(job.id);
  EXPECT_EQ(running->state, JobState::kRunning);
  EXPECT_EQ(running->updated_at_ms, now_);
}

TEST_F(StoreTest, LeaseTaskRefusesLeasedAndDoneTasksAndBadArguments) {
  const Job job = NewJob();
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "a", 5000).ok());
  const Status twice = store_->LeaseTask(key, "b", 5000).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("is leased by worker 'a'"));
  ASSERT_TRUE(store_->CompleteTask(key, Trials(key, 0, 2)).ok());
  EXPECT_EQ(store_->LeaseTask(key, "b", 5000).status().code(),
            absl::StatusCode::kFailedPrecondition);

  const TaskKey other{.job = job.id, .sample = 0, .layer = 1};
  EXPECT_EQ(store_->LeaseTask(other, "", 5000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->LeaseTask(other, std::string(257, 'w'), 5000).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->LeaseTask(other, "a", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetTask(other)->state, TaskState::kPending);
}

TEST_F(StoreTest, OnlyTheLeaseOwnerExtendsOrReleasesALease) {
  const Job job = NewJob();
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "a", 100).ok());
  EXPECT_EQ(store_->ExtendLease(key, "b", 900).status().code(),
            absl::StatusCode::kFailedPrecondition);
  StatusOr<Task> extended = store_->ExtendLease(key, "a", 900);
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_EQ(extended->lease_deadline_ms, 900);
  EXPECT_EQ(store_->ReleaseLease(key, "b").status().code(), absl::StatusCode::kFailedPrecondition);
  StatusOr<Task> released = store_->ReleaseLease(key, "a");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->state, TaskState::kPending);
  EXPECT_EQ(released->attempts, 1u);
  EXPECT_EQ(store_->ExtendLease(key, "a", 1000).status().code(),
            absl::StatusCode::kFailedPrecondition);
  StatusOr<Task> again = store_->LeaseTask(key, "b", 100);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->attempts, 2u);
}

TEST_F(StoreTest, ReleaseExpiredLeasesReleasesOnlyLeasesPastTheirDeadline) {
  const Job job = NewJob(2, 2);
  const TaskKey a{.job = job.id, .sample = 0, .layer = 1},
      b{.job = job.id, .sample = 1, .layer = 0}, c{.job = job.id, .sample = 1, .layer = 1};
  ASSERT_TRUE(store_->LeaseTask(b, "w2", 200).ok());
  ASSERT_TRUE(store_->LeaseTask(a, "w1", 100).ok());
  ASSERT_TRUE(store_->LeaseTask(c, "w3", 300).ok());
  StatusOr<std::vector<TaskKey>> released = store_->ReleaseExpiredLeases(200);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, (std::vector<TaskKey>{a, b}));
  EXPECT_EQ(store_->GetTask(a)->state, TaskState::kPending);
  EXPECT_EQ(store_->GetTask(b)->state, TaskState::kPending);
  EXPECT_EQ(store_->GetTask(c)->state, TaskState::kLeased);
  EXPECT_TRUE(store_->ReleaseExpiredLeases(299)->empty());
}

TEST_F(StoreTest, ReopeningReturnsLeasedTasksToPending) {
  const Job job = NewJob(2, 2);
  EXPECT_EQ(store_->RecoveredLeases(), 0u);
  const TaskKey done{.job = job.id, .sample = 0, .layer = 0};
  Finish(done);
  const TaskKey a{.job = job.id, .sample = 0, .layer = 1},
      b{.job = job.id, .sample = 1, .layer = 1};
  ASSERT_TRUE(store_->LeaseTask(a, "w1", now_ + 1'000'000).ok());
  ASSERT_TRUE(store_->LeaseTask(b, "w2", now_ + 1'000'000).ok());
  ASSERT_TRUE(store_->PutResults(Trials(b, 0, 1)).ok());

  Reopen();
  EXPECT_EQ(store_->RecoveredLeases(), 2u);
  StatusOr<std::vector<Task>> tasks = store_->ListTasks(job.id);
  ASSERT_TRUE(tasks.ok());
  for (const Task& t : *tasks) {
    EXPECT_NE(t.state, TaskState::kLeased);
    EXPECT_TRUE(t.lease_owner.empty());
  }
  EXPECT_EQ(store_->GetTask(done)->state, TaskState::kDone);
  EXPECT_EQ(store_->GetTask(a)->attempts, 1u);
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kRunning);
  EXPECT_EQ(store_->ListTaskResults(b)->size(), 1u);  // partial results survive

  Reopen();
  EXPECT_EQ(store_->RecoveredLeases(), 0u);
}

// ---- Results ----

TEST_F(StoreTest, CompleteTaskStoresResultsAndMarksTheTaskDoneTogether) {
  const Job job = NewJob(2, 2, MakeSpec("ab", 3));
  const TaskKey key{.job = job.id, .sample = 1, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  StatusOr<ResultWriteOutcome> outcome = store_->CompleteTask(key, Trials(key, 0, 3));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->stored, 3u);
  EXPECT_EQ(outcome->duplicates, 0u);
  EXPECT_TRUE(outcome->task_completed);

  StatusOr<Task> task = store_->GetTask(key);
  EXPECT_EQ(task->state, TaskState::kDone);
  EXPECT_TRUE(task->lease_owner.empty());
  EXPECT_EQ(task->lease_deadline_ms, 0);
  StatusOr<Job> updated = store_->GetJob(job.id);
  EXPECT_EQ(updated->tasks_done, 1u);
  EXPECT_EQ(updated->results_stored, 3u);
  EXPECT_EQ(*store_->ListTaskResults(key), Trials(key, 0, 3));
  EXPECT_EQ(*store_->CountResults(job.id), 3u);
}

TEST_F(StoreTest, CompleteTasksWritesAGroupAndAnswersEachAsAlone) {
  const Job first = NewJob(1, 3, MakeSpec("ab", 2));
  const Job second = NewJob(1, 1, MakeSpec("cd", 2));
  const TaskKey a{first.id, 0, 0}, b{first.id, 0, 1}, c{first.id, 0, 2}, d{second.id, 0, 0};
  for (const TaskKey& key : {a, b, c, d}) ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  const std::vector<TrialResult> ra = Trials(a, 0, 2), rc = Trials(c, 0, 2), rd = Trials(d, 0, 2);
  std::vector<TrialResult> rb = Trials(b, 0, 2);
  rb.pop_back();  // trial 1 missing: this one fails, the others do not
  std::vector<TrialResult> ra_again = ra;
  ra_again[1].kl += 1.0;  // a second completion of `a` in the same group, one value differing
  const std::vector<Store::Completion> group = {{a, ra}, {b, rb}, {c, rc}, {d, rd}, {a, ra_again}};
  const std::vector<StatusOr<ResultWriteOutcome>> outcomes = store_->CompleteTasks(group);
  ASSERT_EQ(outcomes.size(), 5u);
  for (size_t i : {0u, 2u, 3u}) {
    ASSERT_TRUE(outcomes[i].ok()) << i << ": " << outcomes[i].status();
    EXPECT_TRUE(outcomes[i]->task_completed) << i;
    EXPECT_EQ(outcomes[i]->stored, 2u) << i;
  }
  EXPECT_EQ(outcomes[1].status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(outcomes[4].ok()) << outcomes[4].status();
  EXPECT_FALSE(outcomes[4]->task_completed) << "the group completed it already";
  EXPECT_EQ(outcomes[4]->duplicates, 2u);
  EXPECT_EQ(outcomes[4]->conflicts, 1u);

  Reopen();  // all of it, or none of it, is durable together
  EXPECT_EQ(store_->GetTask(a)->state, TaskState::kDone);
  EXPECT_EQ(store_->GetTask(b)->state, TaskState::kPending) << "leases return to pending";
  EXPECT_EQ(*store_->CountResults(first.id), 4u);
  EXPECT_EQ(*store_->ListTaskResults(a), ra) << "the first value stays";
  const Job after = *store_->GetJob(first.id);
  EXPECT_EQ(after.tasks_done, 2u);
  EXPECT_EQ(after.results_stored, 4u);
  EXPECT_EQ(after.duplicate_results, 2u);
  EXPECT_EQ(after.conflicting_results, 1u);
  EXPECT_EQ(store_->GetJob(second.id)->tasks_done, 1u);
}

TEST_F(StoreTest, ACompletionRecordsItsWorkerAndVersionInTheTask) {
  const Job job = NewJob(1, 2, MakeSpec("ab", 2));
  const TaskKey named{job.id, 0, 0}, anonymous{job.id, 0, 1};
  for (const TaskKey& key : {named, anonymous}) ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  const std::vector<TrialResult> rn = Trials(named, 0, 2), ra = Trials(anonymous, 0, 2);
  const std::vector<Store::Completion> group = {
      {.key = named, .results = rn, .worker_id = "w", .worker_version = "ripplekv 9.9.9 (abc)"},
      {.key = anonymous, .results = ra}};
  for (const auto& outcome : store_->CompleteTasks(group)) ASSERT_TRUE(outcome.ok());
  // A second completion of a done task changes nothing about who completed it.
  const std::vector<Store::Completion> again = {
      {.key = named, .results = rn, .worker_id = "other", .worker_version = "ripplekv 0.0.1"}};
  ASSERT_TRUE(store_->CompleteTasks(again).front().ok());
  Reopen();
  const Task done = *store_->GetTask(named);
  EXPECT_EQ(done.completed_by, "w");
  EXPECT_EQ(done.completed_by_version, "ripplekv 9.9.9 (abc)");
  const Task unnamed = *store_->GetTask(anonymous);  // encoded as before the fields existed
  EXPECT_EQ(unnamed.state, TaskState::kDone);
  EXPECT_EQ(unnamed.completed_by, "");
  EXPECT_EQ(unnamed.completed_by_version, "");
}

TEST_F(StoreTest, ReopenTasksDeletesTheResultsOfDoneTasksAndMakesThemPendingInOneWrite) {
  const Job job = NewJob(1, 3, MakeSpec("ab", 2));
  const TaskKey a{job.id, 0, 0}, b{job.id, 0, 1}, c{job.id, 0, 2};
  Finish(a);
  Finish(b);
  ASSERT_TRUE(store_->LeaseTask(c, "w", now_ + 1000).ok());
  // c is leased, not done: skipped; a named twice counts once.
  const std::vector<TaskKey> keys = {b, a, c, a};
  StatusOr<std::vector<TaskKey>> reopened = store_->ReopenTasks(job.id, keys);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(*reopened, (std::vector<TaskKey>{a, b}));
  Reopen();  // durable, and a reopened store agrees with the counters
  const Job after = *store_->GetJob(job.id);
  EXPECT_EQ(after.tasks_done, 0u);
  EXPECT_EQ(after.results_stored, 0u);
  EXPECT_EQ(*store_->CountResults(job.id), 0u);
  for (const TaskKey& key : {a, b}) {
    const Task t = *store_->GetTask(key);
    EXPECT_EQ(t.state, TaskState::kPending);
    EXPECT_EQ(t.completed_by, "");
    EXPECT_EQ(t.attempts, 1u) << "attempts stay";
  }
  // Recomputed, they complete again with their results stored once.
  Finish(a);
  EXPECT_EQ(store_->GetJob(job.id)->tasks_done, 1u);
  EXPECT_EQ(*store_->CountResults(job.id), 2u);
  // Another job's key, or a job that is not running, is refused and changes nothing.
  const std::vector<TaskKey> foreign = {{job.id + 1, 0, 0}};
  EXPECT_TRUE(absl::IsInvalidArgument(store_->ReopenTasks(job.id, foreign).status()));
  const Job idle = NewJob(1, 1);
  const std::vector<TaskKey> idle_keys = {{idle.id, 0, 0}};
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ReopenTasks(idle.id, idle_keys).status()));
}

TEST_F(StoreTest, CompleteTaskWithAMissingTrialWritesNothing) {
  const Job job = NewJob(1, 1, MakeSpec("ab", 4));
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  std::vector<TrialResult> some = Trials(key, 0, 4);
  some.erase(some.begin() + 2);
  const Status s = store_->CompleteTask(key, some).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no result for trial 2"));
  EXPECT_EQ(*store_->CountResults(job.id), 0u);
  EXPECT_EQ(store_->GetTask(key)->state, TaskState::kLeased);
  EXPECT_EQ(store_->GetJob(job.id)->results_stored, 0u);
}

TEST_F(StoreTest, CompleteTaskRejectsForeignOutOfRangeAndNonFiniteResults) {
  const Job job = NewJob(1, 2);
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  auto code = [&](std::vector<TrialResult> results) {
    return store_->CompleteTask(key, results).status().code();
  };
  std::vector<TrialResult> foreign = Trials(key, 0, 2);
  foreign[1].layer = 1;
  EXPECT_EQ(code(foreign), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Trials(key, 0, 3)), absl::StatusCode::kInvalidArgument);  // trial 2 of 2
  std::vector<TrialResult> nan = Trials(key, 0, 2);
  nan[0].kl = std::numeric_limits<double>::infinity();
  EXPECT_EQ(code(nan), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store_->CountResults(job.id), 0u);
}

TEST_F(StoreTest, ResultsAreStoredOnceWhateverIsResent) {
  const Job job = NewJob(1, 2, MakeSpec("ab", 4));
  const TaskKey key{.job = job.id, .sample = 0, .layer = 1};
  ASSERT_TRUE(store_->LeaseTask(key, "w1", 5000).ok());

  // Streamed trials, one of them twice within the call.
  std::vector<TrialResult> streamed = Trials(key, 0, 2);
  streamed.push_back(streamed[0]);
  StatusOr<ResultWriteOutcome> put = store_->PutResults(streamed);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->stored, 2u);
  EXPECT_EQ(put->duplicates, 1u);
  EXPECT_FALSE(put->task_completed);
  EXPECT_EQ(store_->GetTask(key)->state, TaskState::kLeased);

  // The completion resends everything; only trials 2 and 3 are new.
  StatusOr<ResultWriteOutcome> done = store_->CompleteTask(key, Trials(key, 0, 4));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->stored, 2u);
  EXPECT_EQ(done->duplicates, 2u);
  EXPECT_TRUE(done->task_completed);

  // A second worker whose lease expired completes the same task: nothing counted twice, and a
  // differing value is reported as a conflict while the first value stays.
  std::vector<TrialResult> late = Trials(key, 0, 4);
  late[3].kl += 1.0;
  StatusOr<ResultWriteOutcome> again = store_->CompleteTask(key, late);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->stored, 0u);
  EXPECT_EQ(again->duplicates, 4u);
  EXPECT_EQ(again->conflicts, 1u);
  EXPECT_FALSE(again->task_completed);

  StatusOr<Job> counted = store_->GetJob(job.id);
  EXPECT_EQ(counted->results_stored, 4u);
  EXPECT_EQ(counted->duplicate_results, 7u);
  EXPECT_EQ(counted->conflicting_results, 1u);
  EXPECT_EQ(counted->tasks_done, 1u);
  EXPECT_EQ(*store_->CountResults(job.id), 4u);
  EXPECT_EQ(*store_->ListTaskResults(key), Trials(key, 0, 4));
}

TEST_F(StoreTest, CompleteTaskAcceptsAWorkerWhoseLeaseExpired) {
  const Job job = NewJob(1, 1);
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  ASSERT_TRUE(store_->LeaseTask(key, "slow", 100).ok());
  ASSERT_EQ(store_->ReleaseExpiredLeases(100)->size(), 1u);
  ASSERT_TRUE(store_->LeaseTask(key, "fast", 500).ok());
  StatusOr<ResultWriteOutcome> slow = store_->CompleteTask(key, Trials(key, 0, 2));
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_TRUE(slow->task_completed);
  StatusOr<ResultWriteOutcome> fast = store_->CompleteTask(key, Trials(key, 0, 2));
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_FALSE(fast->task_completed);
  EXPECT_EQ(fast->duplicates, 2u);
  EXPECT_EQ(store_->GetJob(job.id)->tasks_done, 1u);
}

TEST_F(StoreTest, PutResultsChecksJobTaskAndTrial) {
  const Job job = NewJob(1, 2);
  const Job other = NewJob(1, 2);
  const TaskKey key{.job = job.id, .sample = 0, .layer = 0};
  EXPECT_EQ(store_->PutResults(Trials(key, 0, 1)).status().code(),
            absl::StatusCode::kFailedPrecondition);  // job still pending
  ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
  std::vector<TrialResult> mixed = Trials(key, 0, 1);
  mixed.push_back({.job = other.id, .sample = 0, .layer = 0, .trial = 0, .kl = 1});
  EXPECT_EQ(store_->PutResults(mixed).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->PutResults(Trials({.job = job.id, .sample = 0, .layer = 9}, 0, 1)).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutResults(Trials(key, 2, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  StatusOr<ResultWriteOutcome> none = store_->PutResults({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->stored + none->duplicates, 0u);
  EXPECT_EQ(*store_->CountResults(job.id), 0u);
}

TEST_F(StoreTest, ListResultsIsInCanonicalOrderWithExactValues) {
  JobSpec spec = MakeSpec("ab", 3);
  std::vector<PlannedTask> planned;
  for (uint32_t s : {0u, 1u, 255u, 256u}) {
    for (uint32_t l : {0u, 9u, 10u, 256u, 70000u}) planned.push_back({.sample = s, .layer = l});
  }
  StatusOr<CreateJobOutcome> created = store_->CreateJob(spec, planned);
  ASSERT_TRUE(created.ok()) << created.status();
  const JobId id = created->job.id;
  NewJob(1, 1);  // a later job whose results must not leak into job 1's listing

  std::mt19937 rng(3);
  std::shuffle(planned.begin(), planned.end(), rng);
  std::vector<TrialResult> expected;
  for (const PlannedTask& p : planned) {
    const TaskKey key{.job = id, .sample = p.sample, .layer = p.layer};
    ASSERT_TRUE(store_->LeaseTask(key, "w", 5000).ok());
    std::vector<TrialResult> trials = Trials(key, 0, 3);
    for (TrialResult& r : trials) r.kl = std::bit_cast<double>(rng() * 0x9E3779B97F4A7C15ull >> 2);
    std::reverse(trials.begin(), trials.end());
    ASSERT_TRUE(store_->CompleteTask(key, trials).ok());
    expected.insert(expected.end(), trials.begin(), trials.end());
  }
  std::sort(expected.begin(), expected.end(), [](const TrialResult& a, const TrialResult& b) {
    return std::tie(a.sample, a.layer, a.trial) < std::tie(b.sample, b.layer, b.trial);
  });
  Reopen();
  StatusOr<std::vector<TrialResult>> listed = store_->ListResults(id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ((*listed)[i].sample, expected[i].sample) << i;
    ASSERT_EQ((*listed)[i].layer, expected[i].layer) << i;
    ASSERT_EQ((*listed)[i].trial, expected[i].trial) << i;
    ASSERT_EQ(std::bit_cast<uint64_t>((*listed)[i].kl), std::bit_cast<uint64_t>(expected[i].kl));
  }
  EXPECT_EQ(*store_->CountResults(id), expected.size());
}

// ---- Profiles and budget maps ----

TEST_F(StoreTest, ProfileVersionsCountFromOneAndNeverOverwrite) {
  StatusOr<ProfileVersion> v1 = store_->PutProfileVersion("ab", R"({"n": 1})");
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->version, 1u);
  EXPECT_EQ(v1->job, kNoJob);
  ASSERT_EQ(store_->PutProfileVersion("ab", R"({"n": 2})")->version, 2u);
  ASSERT_EQ(store_->PutProfileVersion("abc", R"({"n": 3})")->version, 1u);
  ASSERT_EQ(store_->PutProfileVersion("a", R"({"n": 4})")->version, 1u);
  Reopen();
  StatusOr<ProfileVersion> v3 = store_->PutProfileVersion("ab", R"({"n": 5})");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->version, 3u);

  EXPECT_EQ(*store_->GetProfile("ab", 1), *v1);
  EXPECT_EQ(store_->GetProfile("ab")->profile_json, R"({"n": 5})");
  EXPECT_EQ(store_->GetProfile("ab", kLatestVersion)->version, 3u);

  StatusOr<std::vector<ProfileVersion>> ab = store_->ListProfiles("ab");
  ASSERT_TRUE(ab.ok()) << ab.status();
  ASSERT_EQ(ab->size(), 3u);
  EXPECT_EQ((*ab)[0].profile_json, R"({"n": 1})");
  EXPECT_EQ((*ab)[1].profile_json, R"({"n": 2})");
  StatusOr<std::vector<ProfileVersion>> all = store_->ListProfiles();
  ASSERT_TRUE(all.ok());
  std::vector<std::pair<std::string, uint32_t>> order;
  for (const ProfileVersion& p : *all) order.emplace_back(p.model_hash, p.version);
  EXPECT_EQ(order, (std::vector<std::pair<std::string, uint32_t>>{
                       {"a", 1}, {"ab", 1}, {"ab", 2}, {"ab", 3}, {"abc", 1}}));

  EXPECT_EQ(store_->GetProfile("ab", 4).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetProfile("ff").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListProfiles("ff")->empty());
  EXPECT_EQ(store_->PutProfileVersion("ab", "{not json").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutProfileVersion("", "{}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListProfiles("ab")->size(), 3u);
}

TEST_F(StoreTest, PutProfileVersionFinishesItsJobInTheSameWrite) {
  const Job job = NewJob(1, 2, MakeSpec("cafe"));
  Finish({.job = job.id, .sample = 0, .layer = 0});
  const Status early = store_->PutProfileVersion("cafe", "{}", job.id).status();
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(early.message()), HasSubstr("1 of 2 tasks done"));
  Finish({.job = job.id, .sample = 0, .layer = 1});
  EXPECT_EQ(store_->PutProfileVersion("beef", "{}", job.id).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutProfileVersion("cafe", "{}", 99).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListProfiles()->empty());

  now_ += 3;
  StatusOr<ProfileVersion> profile = store_->PutProfileVersion("cafe", R"({"ok": true})", job.id);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->version, 1u);
  EXPECT_EQ(profile->job, job.id);
  StatusOr<Job> finished = store_->GetJob(job.id);
  EXPECT_EQ(finished->state, JobState::kSucceeded);
  EXPECT_EQ(finished->profile_version, 1u);
  EXPECT_EQ(finished->updated_at_ms, now_);

  // A restarted scheduler finishing the job again gets an error, not a second version.
  EXPECT_EQ(store_->PutProfileVersion("cafe", R"({"ok": true})", job.id).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->ListProfiles("cafe")->size(), 1u);
}

TEST_F(StoreTest, BudgetMapsAreVersionedAndReferenceAnExistingProfile) {
  EXPECT_EQ(store_->PutBudgetMap("ab", kLatestVersion, "{}").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->PutProfileVersion("ab", R"({"p": 1})").ok());
  ASSERT_TRUE(store_->PutProfileVersion("ab", R"({"p": 2})").ok());
  EXPECT_EQ(store_->PutBudgetMap("ab", 3, "{}").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutBudgetMap("ab", 1, "[1,").status().code(),
            absl::StatusCode::kInvalidArgument);

  StatusOr<BudgetMapPut> m1 = store_->PutBudgetMap("ab", 1, R"({"b": [1]})");
  ASSERT_TRUE(m1.ok()) << m1.status();
  EXPECT_TRUE(m1->created);
  EXPECT_EQ(m1->map.version, 1u);
  EXPECT_EQ(m1->map.profile_version, 1u);
  StatusOr<BudgetMapPut> m2 = store_->PutBudgetMap("ab", kLatestVersion, R"({"b": [2]})");
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_TRUE(m2->created);
  EXPECT_EQ(m2->map.version, 2u);
  EXPECT_EQ(m2->map.profile_version, 2u);

  Reopen();
  EXPECT_EQ(*store_->GetBudgetMap("ab", 1), m1->map);
  EXPECT_EQ(*store_->GetBudgetMap("ab"), m2->map);
  EXPECT_EQ(store_->GetBudgetMap("ab", 3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetBudgetMap("cd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListBudgetMaps("ab")->size(), 2u);
  EXPECT_EQ(store_->ListBudgetMaps()->size(), 2u);
  EXPECT_TRUE(store_->ListBudgetMaps("a")->empty());
}

TEST_F(StoreTest, BudgetMapDigestIsTheSha256PrefixOfItsBytes) {
  ASSERT_TRUE(store_->PutProfileVersion("ab", "{}").ok());
  // sha256("{}") = 44136fa355b3678a1146ad16...; sha256(R"({"b": [1]})") = de2a362433a173e9...
  StatusOr<BudgetMapPut> empty = store_->PutBudgetMap("ab", 1, "{}");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->map.digest, "44136fa355b3678a");
  StatusOr<BudgetMapPut> b1 = store_->PutBudgetMap("ab", 1, R"({"b": [1]})");
  ASSERT_TRUE(b1.ok()) << b1.status();
  EXPECT_EQ(b1->map.digest, "de2a362433a173e9");
  // Bytes, not JSON values: other whitespace is another map.
  StatusOr<BudgetMapPut> spaced = store_->PutBudgetMap("ab", 1, R"({"b":[1]})");
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_TRUE(spaced->created);
  EXPECT_NE(spaced->map.digest, b1->map.digest);
}

TEST_F(StoreTest, PutBudgetMapOfTheSameBytesReturnsTheStoredMapAndWritesNothing) {
  ASSERT_TRUE(store_->PutProfileVersion("ab", R"({"p": 1})").ok());
  now_ = 100;
  StatusOr<BudgetMapPut> first = store_->PutBudgetMap("ab", 1, R"({"b": [1]})");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->map.version, 1u);
  EXPECT_EQ(first->map.created_at_ms, 100);

  // Later, against a newer profile: the stored map as it was (profile, time), no new sequence.
  ASSERT_TRUE(store_->PutProfileVersion("ab", R"({"p": 2})").ok());
  now_ = 200;
  StatusOr<BudgetMapPut> again = store_->PutBudgetMap("ab", kLatestVersion, R"({"b": [1]})");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->map, first->map);
  EXPECT_EQ(store_->ListBudgetMaps("ab")->size(), 1u);

  // Other bytes: the next sequence number and another digest.
  StatusOr<BudgetMapPut> other = store_->PutBudgetMap("ab", kLatestVersion, R"({"b": [2]})");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(other->created);
  EXPECT_EQ(other->map.version, 2u);
  EXPECT_EQ(other->map.profile_version, 2u);
  EXPECT_NE(other->map.digest, first->map.digest);

  // The same bytes under another model hash are that model's own map.
  ASSERT_TRUE(store_->PutProfileVersion("cd", "{}").ok());
  StatusOr<BudgetMapPut> elsewhere = store_->PutBudgetMap("cd", 1, R"({"b": [1]})");
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_TRUE(elsewhere->created);
  EXPECT_EQ(elsewhere->map.version, 1u);
  EXPECT_EQ(elsewhere->map.digest, first->map.digest);

  Reopen();  // the index is durable: still idempotent
  StatusOr<BudgetMapPut> reopened = store_->PutBudgetMap("ab", 1, R"({"b": [1]})");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_FALSE(reopened->created);
  EXPECT_EQ(reopened->map, first->map);
  EXPECT_EQ(store_->ListBudgetMaps("ab")->size(), 2u);
}

TEST_F(StoreTest, GetBudgetMapByDigestFindsOnlyThatModelsMap) {
  ASSERT_TRUE(store_->PutProfileVersion("ab", "{}").ok());
  ASSERT_TRUE(store_->PutBudgetMap("ab", 1, R"({"b": [1]})").ok());
  StatusOr<BudgetMapPut> put = store_->PutBudgetMap("ab", 1, R"({"b": [2]})");
  ASSERT_TRUE(put.ok()) << put.status();

  Reopen();
  StatusOr<BudgetMapRecord> found = store_->GetBudgetMapByDigest("ab", put->map.digest);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, put->map);
  EXPECT_EQ(found->version, 2u);
  EXPECT_EQ(store_->GetBudgetMapByDigest("ab", "0123456789abcdef").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetBudgetMapByDigest("cd", put->map.digest).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetBudgetMapByDigest("ab", "A99CD002299977A3").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetBudgetMapByDigest("", put->map.digest).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Opening ----

TEST_F(StoreTest, ASecondOpenOfTheSameDatabaseIsUnavailable) {
  StatusOr<std::unique_ptr<Store>> second = OpenStore(dir_.db(), options_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST(StoreOpenTest, MissingDatabaseWithoutCreateIsNotFound) {
  TempDir dir;
  StatusOr<std::unique_ptr<Store>> s = OpenStore(dir.db(), {.create_if_missing = false});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound) << s.status();
}

TEST(StoreOpenTest, DefaultOptionsSyncAndUseTheSystemClock) {
  TempDir dir;
  StatusOr<std::unique_ptr<Store>> s = OpenStore(dir.db());
  ASSERT_TRUE(s.ok()) << s.status();
  const auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  StatusOr<CreateJobOutcome> job = (*s)->CreateJob(MakeSpec(), Grid(1, 1));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GE(job->job.created_at_ms, before);
  EXPECT_LT(job->job.created_at_ms, before + 60'000);
}

// ---- Threads ----

TEST_F(StoreTest, ConcurrentWritersAndReadersKeepCountsExact) {
  constexpr uint32_t kLayers = 40;
  const Job job = NewJob(4, kLayers);
  std::atomic<bool> stop{false};
  std::atomic<int> bad_reads{0};
  std::thread reader([&] {
    while (!stop) {
      StatusOr<Job> j = store_->GetJob(job.id);
      StatusOr<std::vector<TrialResult>> r = store_->ListResults(job.id);
      if (!j.ok() || !r.ok() || r->size() % 2 != 0) ++bad_reads;  // whole tasks only
    }
  });
  std::vector<std::thread> writers;
  for (uint32_t s = 0; s < 4; ++s) {
    writers.emplace_back([&, s] {
      for (uint32_t l = 0; l < kLayers; ++l) {
        const TaskKey key{.job = job.id, .sample = s, .layer = l};
        if (!store_->LeaseTask(key, absl::StrCat("w", s), 1'000'000'000).ok()) ++bad_reads;
        if (!store_->CompleteTask(key, Trials(key, 0, 2)).ok()) ++bad_reads;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(bad_reads.load(), 0);
  StatusOr<Job> done = store_->GetJob(job.id);
  EXPECT_EQ(done->tasks_done, 4u * kLayers);
  EXPECT_EQ(done->results_stored, 8u * kLayers);
  EXPECT_EQ(*store_->CountResults(job.id), 8u * kLayers);
}

}  // namespace
}  // namespace ripplekv::store
