#pragma once
// The scheduler core's test fixture: a store in a temporary directory, a Scheduler over it on a
// clock the test drives, and helpers to register workers, submit jobs and complete tasks with
// deterministic results.

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/core/scheduler.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::scheduler {

inline constexpr char kHash[] = "5a6b7c";
inline constexpr char kOtherHash[] = "ffff00";

using store::testing::TempDir;  // removed with its database at scope exit

inline method::ProfileModel Model(const std::string& hash = kHash, int64_t n_layers = 30) {
  return {.hash = hash,
          .architecture = "llama",
          .name = "test-model",
          .n_layers = n_layers,
          .n_kv_heads = 3,
          .head_dim = 64,
          .d_model = 576,
          .vocab_size = 49152};
}

inline store::JobSpec Spec(uint32_t samples, uint32_t trials = 2, int32_t priority = 0) {
  store::JobSpec spec;
  spec.model_path = "/models/m.gguf";
  spec.model_hash = kHash;
  spec.params.alpha = 0.5;
  spec.params.trials = trials;
  spec.params.samples = samples;
  spec.params.context_len = 64;
  spec.params.probe_len = 8;
  spec.params.seed = 7;
  spec.priority = priority;
  return spec;
}

// A deterministic, irregular KL per (sample, layer, trial): sums in another order would round
// differently, so order independence is really tested.
inline double Kl(uint32_t s, uint32_t l, uint32_t t) {
  return 0.01 * (1.0 + std::sin(0.7 * l + 1.3 * s + 0.37 * t)) + 1e-3 / (3.0 + s + l * t);
}

inline std::vector<store::TrialResult> ResultsOf(const store::TaskKey& key, uint32_t trials) {
  std::vector<store::TrialResult> out;
  for (uint32_t t = 0; t < trials; ++t) {
    out.push_back({.job = key.job,
                   .sample = key.sample,
                   .layer = key.layer,
                   .trial = t,
                   .kl = Kl(key.sample, key.layer, t)});
  }
  return out;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(SchedulerOptions options = {}) {
    scheduler_.reset();
    store_.reset();
    store::StoreOptions so;
    so.sync_writes = false;
    so.clock = [this] { return now_; };
    auto st = store::OpenStore(dir_.db(), so);
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = *std::move(st);
    // Jobs verify nothing unless a test asks (SubmitRequest::verify_fraction).
    options.faults.default_verify_fraction = 0;
    scheduler_ = std::make_unique<Scheduler>(store_.get(), options, [this] { return now_; });
  }

  void Register(const std::string& id, uint32_t capacity = 1, const std::string& hash = kHash) {
    ASSERT_TRUE(
        scheduler_->RegisterWorker({.worker_id = id, .model = Model(hash), .capacity = capacity})
            .ok());
  }

  store::Job Submit(const store::JobSpec& spec, int64_t n_layers = 30) {
    auto outcome = scheduler_->SubmitJob({.spec = spec, .model_n_layers = n_layers});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job : store::Job{};
  }

  std::optional<Assignment> Next(const std::string& id) {
    auto a = scheduler_->NextTask(id);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : std::nullopt;
  }

  // The lease of `key` as the store has it now (its attempt number).
  LeaseId Held(const store::TaskKey& key) {
    auto task = store_->GetTask(key);
    EXPECT_TRUE(task.ok()) << task.status();
    return {.key = key, .attempt = task.ok() ? task->attempts : 0};
  }

  TaskResultsOutcome Complete(const std::string& id, const store::TaskKey& key, uint32_t trials) {
    auto out = scheduler_->CompleteTask(id, Held(key), ResultsOf(key, trials));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : TaskResultsOutcome{};
  }

  // Runs every pending task with one worker of capacity 1; returns the last outcome.
  TaskResultsOutcome Drain(const std::string& id, uint32_t trials) {
    TaskResultsOutcome last;
    while (auto a = Next(id)) last = Complete(id, a->key, trials);
    return last;
  }

  std::string ProfileJson(store::JobId job) {
    auto j = store_->GetJob(job);
    EXPECT_TRUE(j.ok());
    auto p = store_->GetProfile(kHash, j->profile_version);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? p->profile_json : std::string();
  }

  // The events of type T the scheduler appended since the last TakeEvents, in order (events of
  // other types are taken and dropped).
  template <typename T>
  std::vector<T> TakeEventsOf() {
    std::vector<T> out;
    for (Event& event : scheduler_->TakeEvents()) {
      if (T* typed = std::get_if<T>(&event)) out.push_back(std::move(*typed));
    }
    return out;
  }

  TempDir dir_;
  int64_t now_ = 1'700'000'000'000;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace ripplekv::scheduler
