// Jobs of rounds (params.until_stable) through the scheduler core on a real store: a round's last
// task either finishes the job (stable, or at max_samples) or extends it by the next round, whose
// tasks are leasable at once with the samples planned so far; the final profile is the one the
// local loop (worker::CalibrateUntilStable) assembles from the same results; restarts between
// rounds or inside one lose and repeat nothing.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "method/profile.h"
#include "method/profile_aggregate.h"
#include "method/profile_stability.h"
#include "scheduler/core/scheduler.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::scheduler {
namespace {

// Jobs verify nothing here: verification has tests of its own (scheduler_test.cc).
constexpr FaultOptions kNoVerification{.default_verify_fraction = 0};

constexpr char kHash[] = "5a6b7c";
constexpr int64_t kLayers = 4;
constexpr uint32_t kTrials = 2;

using store::testing::TempDir;  // removed with its database at scope exit

method::ProfileModel Model() {
  return {.hash = kHash,
          .architecture = "llama",
          .name = "test-model",
          .n_layers = kLayers,
          .n_kv_heads = 3,
          .head_dim = 64,
          .d_model = 576,
          .vocab_size = 49152};
}

store::JobSpec RoundsSpec(uint32_t samples = 2, uint32_t max_samples = 6) {
  store::JobSpec spec;
  spec.model_path = "/models/m.gguf";
  spec.model_hash = kHash;
  spec.data_inline = "calibration text";
  spec.data_format = store::DataFormat::kText;
  spec.params.alpha = 0.5;
  spec.params.trials = kTrials;
  spec.params.samples = samples;
  spec.params.context_len = 64;
  spec.params.probe_len = 8;
  spec.params.seed = 7;
  spec.params.data_seed = 11;
  spec.params.until_stable = true;
  spec.params.max_samples = max_samples;
  return spec;
}

// KL that varies strongly from sample to sample: the budget shares stay uncertain.
double NoisyKl(uint32_t s, uint32_t l, uint32_t t) {
  return 0.01 * (1.0 + std::sin(0.7 * l + 1.3 * s + 0.37 * t)) + 1e-3 / (3.0 + s + l * t);
}
// KL of the layer alone: every sample agrees, so the first round is stable.
double SteadyKl(uint32_t /*s*/, uint32_t l, uint32_t t) { return 0.01 * (1.0 + l) + 1e-6 * t; }

using KlFn = double (*)(uint32_t, uint32_t, uint32_t);

std::string Description(uint32_t samples) {
  return absl::StrCat("inline text: ", samples, " samples x (context 64 + probe 8) tokens");
}

// What `ripplekv calibrate --until-stable` would write for these KLs: rounds of params.samples
// up to max_samples, each assembled over every sample so far, stopping when stable.
method::SensitivityProfile LocalUntilStable(const method::CalibrationParams& p, KlFn kl) {
  std::vector<method::TrialKl> results;
  uint32_t done = 0;
  while (true) {
    const uint32_t target = std::min(p.max_samples, done + p.samples);
    for (uint32_t s = done; s < target; ++s) {
      for (uint32_t l = 0; l < kLayers; ++l) {
        for (uint32_t t = 0; t < p.trials; ++t) results.push_back({s, l, t, kl(s, l, t)});
      }
    }
    done = target;
    const method::ProfileParams params = method::MeasuredParams(p, done, Description(done), "user");
    StatusOr<method::SensitivityProfile> profile =
        method::AssembleProfile(Model(), params, results, "2024-01-01T00:00:00Z");
    EXPECT_TRUE(profile.ok()) << profile.status();
    StatusOr<method::ProfileStability> stability = method::ComputeStability(*profile);
    EXPECT_TRUE(stability.ok()) << stability.status();
    profile->stability = *stability;
    if (stability->stable || done >= p.max_samples) return *profile;
  }
}

class SchedulerRoundsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  // A fresh scheduler over the store reopened (what a restarted process finds).
  void Open() {
    scheduler_.reset();
    store_.reset();
    store::StoreOptions so;
    so.sync_writes = false;
    so.clock = [this] { return now_; };
    auto st = store::OpenStore(dir_.db(), so);
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = *std::move(st);
    scheduler_ =
        std::make_unique<Scheduler>(store_.get(), SchedulerOptions{.faults = kNoVerification},
                                    [this] { return now_; });
    ASSERT_TRUE(scheduler_->RegisterWorker({.worker_id = "w", .model = Model()}).ok());
  }

  store::Job Submit(const store::JobSpec& spec) {
    auto outcome = scheduler_->SubmitJob({.spec = spec, .model_n_layers = kLayers});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job : store::Job{};
  }

  std::optional<Assignment> Next() {
    auto a = scheduler_->NextTask("w");
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : std::nullopt;
  }

  // Runs `a` as a worker would: describes the data of the samples it was given, then completes.
  TaskResultsOutcome Run(const Assignment& a, KlFn kl) {
    EXPECT_TRUE(scheduler_->DescribeJobData(a.key.job, Description(a.params.samples)).ok());
    std::vector<store::TrialResult> results;
    for (uint32_t t = 0; t < a.trials; ++t) {
      results.push_back(
          {a.key.job, a.key.sample, a.key.layer, t, kl(a.key.sample, a.key.layer, t)});
    }
    auto out = scheduler_->CompleteTask("w", {.key = a.key, .attempt = a.attempts}, results);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : TaskResultsOutcome{};
  }

  // Runs tasks until none is offered, or `limit` of them; every extension is recorded.
  TaskResultsOutcome Drain(KlFn kl, int limit = 1 << 20) {
    TaskResultsOutcome last;
    while (limit-- > 0) {
      std::optional<Assignment> a = Next();
      if (!a) break;
      last = Run(*a, kl);
      if (last.job_extended) extensions_.push_back(last.samples_planned);
    }
    return last;
  }

  method::SensitivityProfile StoredProfile(store::JobId id) {
    auto job = store_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, store::JobState::kSucceeded);
    auto stored = scheduler_->GetProfile(kHash, job->profile_version);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.ok() ? stored->profile : method::SensitivityProfile{};
  }

  // Equal to the local loop's profile in every field but created_at.
  void ExpectLocalProfile(store::JobId id, const method::CalibrationParams& params, KlFn kl) {
    method::SensitivityProfile got = StoredProfile(id);
    method::SensitivityProfile want = LocalUntilStable(params, kl);
    got.created_at = want.created_at;
    got.tool_version = want.tool_version;
    StatusOr<std::string> a = method::ProfileToJson(got);
    StatusOr<std::string> b = method::ProfileToJson(want);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
  }

  TempDir dir_;
  int64_t now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<uint32_t> extensions_;  // samples planned after each extension Drain saw
};

TEST_F(SchedulerRoundsTest, AStableFirstRoundFinishesTheJobWithThatRoundsSamples) {
  const store::Job job = Submit(RoundsSpec());
  EXPECT_EQ(job.samples_planned, 2u);
  EXPECT_EQ(job.tasks_total, 2u * kLayers);  // the first round only
  const TaskResultsOutcome last = Drain(SteadyKl);
  EXPECT_TRUE(last.job_succeeded);
  EXPECT_TRUE(extensions_.empty());
  const method::SensitivityProfile profile = StoredProfile(job.id);
  EXPECT_EQ(profile.params.samples, 2);
  ASSERT_TRUE(profile.stability.has_value());
  EXPECT_TRUE(profile.stability->stable);
  ExpectLocalProfile(job.id, job.spec.params, SteadyKl);
}

TEST_F(SchedulerRoundsTest, AnUnstableJobGrowsByRoundsToTheCapAndEqualsTheLocalLoop) {
  const store::Job job = Submit(RoundsSpec(2, 5));
  // Round 1's last task extends the job; the next round is offered at once, with the samples
  // planned so far for the worker to read and the job's data seed.
  for (int i = 0; i < 2 * kLayers; ++i) {
    std::optional<Assignment> a = Next();
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->params.samples, 2u);
    EXPECT_EQ(a->params.data_seed, 11u);
    const TaskResultsOutcome out = Run(*a, NoisyKl);
    EXPECT_EQ(out.job_extended, i == 2 * kLayers - 1);
    EXPECT_FALSE(out.job_succeeded);
  }
  auto extended = store_->GetJobMeta(job.id);
  ASSERT_TRUE(extended.ok());
  EXPECT_EQ(extended->samples_planned, 4u);
  EXPECT_EQ(extended->tasks_total, 4u * kLayers);
  EXPECT_EQ(extended->state, store::JobState::kRunning);
  EXPECT_TRUE(extended->data_description.empty());
  auto progress = scheduler_->Progress(job.id);
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->job.samples_planned, 4u);
  std::optional<Assignment> next = Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->key.sample, 2u);
  EXPECT_EQ(next->params.samples, 4u);
  // The new round's description is taken as the job's (the old one named 2 samples).
  auto same = scheduler_->DescribeJobData(job.id, Description(4));
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(*same);
  Run(*next, NoisyKl);

  const TaskResultsOutcome last = Drain(NoisyKl);
  EXPECT_TRUE(last.job_succeeded);
  EXPECT_EQ(extensions_, std::vector<uint32_t>({5}));  // 4 -> 5: the last round is cut at the cap
  const method::SensitivityProfile profile = StoredProfile(job.id);
  EXPECT_EQ(profile.params.samples, 5);
  EXPECT_EQ(profile.params.data_source, Description(5));
  ASSERT_TRUE(profile.stability.has_value());
  EXPECT_FALSE(profile.stability->stable);  // capped
  ExpectLocalProfile(job.id, job.spec.params, NoisyKl);
  auto results = store_->CountResults(job.id);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(*results, 5u * kLayers * kTrials);
}

// A crash after a round's last completion but before its extension: the restarted scheduler's
// first tick extends the job once; a crash after the extension finds the new round pending.
TEST_F(SchedulerRoundsTest, RestartsBetweenRoundsExtendOnceAndLoseNothing) {
  const store::Job job = Submit(RoundsSpec(2, 6));
  // Round 1 written straight to the store, as if the scheduler died before its bookkeeping.
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t l = 0; l < kLayers; ++l) {
      const store::TaskKey key{job.id, s, l};
      ASSERT_TRUE(store_->LeaseTask(key, "w", now_ + 1000).ok());
      std::vector<store::TrialResult> results;
      for (uint32_t t = 0; t < kTrials; ++t) results.push_back({job.id, s, l, t, NoisyKl(s, l, t)});
      ASSERT_TRUE(store_->CompleteTask(key, results).ok());
    }
  }
  ASSERT_TRUE(store_->SetDataDescription(job.id, Description(2)).ok());
  Open();
  auto tick = scheduler_->ExpireLeases();
  ASSERT_TRUE(tick.ok()) << tick.status();
  EXPECT_EQ(tick->jobs_extended, std::vector<store::JobId>({job.id}));
  EXPECT_TRUE(tick->profiles_written.empty());
  tick = scheduler_->ExpireLeases();
  ASSERT_TRUE(tick.ok());
  EXPECT_TRUE(tick->jobs_extended.empty());  // extended once

  // Part of round 2, then a crash mid-round with a task leased: it returns to pending.
  Drain(NoisyKl, kLayers + 1);
  ASSERT_TRUE(Next().has_value());
  Open();
  EXPECT_EQ(store_->RecoveredLeases(), 1u);
  auto meta = store_->GetJobMeta(job.id);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->samples_planned, 4u);
  EXPECT_EQ(meta->tasks_done, 2u * kLayers + kLayers + 1);
  tick = scheduler_->ExpireLeases();
  ASSERT_TRUE(tick.ok());
  EXPECT_TRUE(tick->jobs_extended.empty());
  std::optional<Assignment> next = Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->params.samples, 4u);
  EXPECT_EQ(next->key.sample, 3u);
  Run(*next, NoisyKl);
  Drain(NoisyKl);
  ExpectLocalProfile(job.id, job.spec.params, NoisyKl);
  auto final_job = store_->GetJobMeta(job.id);
  ASSERT_TRUE(final_job.ok());
  EXPECT_EQ(final_job->duplicate_results, 0u);
  EXPECT_EQ(final_job->results_stored, uint64_t{final_job->samples_planned} * kLayers * kTrials);
}

TEST_F(SchedulerRoundsTest, SubmissionChecksTheCapAgainstTheJobLimits) {
  store::JobSpec spec = RoundsSpec(2, 1);
  auto low_cap = scheduler_->SubmitJob({.spec = spec, .model_n_layers = kLayers});
  ASSERT_TRUE(absl::IsInvalidArgument(low_cap.status()));
  EXPECT_NE(low_cap.status().message().find("params.max_samples"), std::string::npos);
  spec = RoundsSpec(2, 64);
  scheduler_.reset();
  SchedulerOptions options{.faults = kNoVerification};
  options.max_tasks_per_job = 100;  // 2 x 4 tasks now, but 64 x 4 at the cap
  scheduler_ = std::make_unique<Scheduler>(store_.get(), options, [this] { return now_; });
  auto too_many = scheduler_->SubmitJob({.spec = spec, .model_n_layers = kLayers});
  ASSERT_TRUE(absl::IsInvalidArgument(too_many.status()));
  EXPECT_NE(too_many.status().message().find("params.max_samples"), std::string::npos);
}

}  // namespace
}  // namespace ripplekv::scheduler
