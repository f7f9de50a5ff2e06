// How the scheduler records one model summary per hash (scheduler/core/scheduler.h, "Model
// summary"): never from a single registration, so one worker cannot lock the others out.

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "method/profile.h"
#include "scheduler/core/scheduler.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace ripplekv::scheduler {
namespace {

// Jobs verify nothing here: verification has tests of its own (scheduler_test.cc).
constexpr FaultOptions kNoVerification{.default_verify_fraction = 0};

constexpr char kHash[] = "b179c9";
constexpr char kName[] = "SmolLM2 135M Instruct";

using store::testing::TempDir;  // removed with its database at scope exit

method::ProfileModel Genuine() {
  return {.hash = kHash,
          .architecture = "llama",
          .name = kName,
          .n_layers = 30,
          .n_kv_heads = 3,
          .head_dim = 64,
          .d_model = 576,
          .vocab_size = 49152};
}

method::ProfileModel Named(const std::string& name) {
  method::ProfileModel m = Genuine();
  m.name = name;
  return m;
}

store::JobSpec Spec() {
  store::JobSpec spec;
  spec.model_path = "/models/m.gguf";
  spec.model_hash = kHash;
  spec.params.alpha = 0.5;
  spec.params.trials = 1;
  spec.params.samples = 1;
  spec.params.context_len = 64;
  spec.params.probe_len = 8;
  spec.params.seed = 7;
  return spec;
}

class ModelSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

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
  }

  Status Register(const std::string& id, const method::ProfileModel& model) {
    return scheduler_->RegisterWorker({.worker_id = id, .model = model, .capacity = 4});
  }

  store::Job Submit(const std::string& name) {
    auto outcome =
        scheduler_->SubmitJob({.spec = Spec(), .model_n_layers = 30, .model_name = name});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? outcome->job : store::Job{};
  }

  // The summary recorded for kHash in the store; empty when none is.
  std::string Recorded() {
    auto stored = store_->ListModelSummaries();
    EXPECT_TRUE(stored.ok()) << stored.status();
    for (const auto& [hash, json] : *stored) {
      if (hash == kHash) return json;
    }
    return {};
  }

  TempDir dir_;
  int64_t now_ = 1'700'000'000'000;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(ModelSummaryTest, AMislabelledFirstRegistrationLocksNoWorkerOut) {
  ASSERT_TRUE(Register("vm", Named("x")).ok());
  Status genuine = Register("genuine", Genuine());
  EXPECT_TRUE(genuine.ok()) << genuine;
  EXPECT_EQ(Recorded(), "") << "one registration each records nothing";
  EXPECT_EQ(scheduler_->Workers(), (std::vector<std::string>{"genuine", "vm"}));
}

TEST_F(ModelSummaryTest, TheFirstJobsModelRefChoosesTheSummaryAndDropsTheMislabelledWorker) {
  ASSERT_TRUE(Register("vm", Named("x")).ok());
  ASSERT_TRUE(Register("genuine", Genuine()).ok());
  Submit(kName);
  EXPECT_EQ(Recorded(), method::ProfileModelToJson(Genuine()));
  EXPECT_EQ(scheduler_->Workers(), std::vector<std::string>{"genuine"});
  Status told = scheduler_->Heartbeat("vm", {}, {});
  ASSERT_TRUE(absl::IsFailedPrecondition(told)) << told;
  EXPECT_NE(told.message().find("name: \"x\" (recorded \"SmolLM2 135M Instruct\")"),
            std::string_view::npos)
      << told;
  auto next = scheduler_->NextTask("genuine");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->has_value());
}

TEST_F(ModelSummaryTest, BeforeTheSummaryIsRecordedOnlyWorkersAgreeingWithTheJobGetItsTasks) {
  Submit(kName);
  ASSERT_TRUE(Register("vm", Named("x")).ok());
  EXPECT_EQ(Recorded(), "") << "the only worker disagrees with the job's ModelRef";
  auto offered = scheduler_->NextTask("vm");
  ASSERT_TRUE(offered.ok()) << offered.status();
  EXPECT_FALSE(offered->has_value()) << "a mislabelled worker got a task of the job";
  ASSERT_TRUE(Register("genuine", Genuine()).ok());
  EXPECT_EQ(Recorded(), method::ProfileModelToJson(Genuine()));
  EXPECT_TRUE(absl::IsFailedPrecondition(scheduler_->NextTask("vm").status()));
}

TEST_F(ModelSummaryTest, TwoWorkersAgreeingRecordTheirSummaryWithoutAJob) {
  ASSERT_TRUE(Register("a", Genuine()).ok());
  EXPECT_EQ(Recorded(), "") << "one registration alone records nothing";
  ASSERT_TRUE(Register("vm", Named("x")).ok());
  ASSERT_TRUE(Register("b", Genuine()).ok());
  EXPECT_EQ(Recorded(), method::ProfileModelToJson(Genuine()));
  EXPECT_EQ(scheduler_->Workers(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(ModelSummaryTest, ADifferingRegistrationIsRefusedNamingEachFieldForThatWorkerOnly) {
  ASSERT_TRUE(Register("a", Genuine()).ok());
  ASSERT_TRUE(Register("b", Genuine()).ok());
  method::ProfileModel differs = Named("x");
  differs.n_layers = 31;
  Status refused = Register("late", differs);
  ASSERT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find(
                "name: \"x\" (recorded \"SmolLM2 135M Instruct\"), n_layers: 31 (recorded 30)"),
            std::string_view::npos)
      << refused;
  EXPECT_EQ(refused.message().find("head_dim"), std::string_view::npos) << refused;
  EXPECT_EQ(scheduler_->Workers(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(Register("c", Genuine()).ok());
}

TEST_F(ModelSummaryTest, AConnectedWorkerThatDisagreesIsDroppedAndItsLeasesReturnToPending) {
  ASSERT_TRUE(Register("a", Genuine()).ok());
  ASSERT_TRUE(Register("vm", Named("x")).ok());
  Submit("");  // no name: both agree with the job, and one each is a tie
  EXPECT_EQ(Recorded(), "");
  auto leased = scheduler_->NextTask("vm");
  ASSERT_TRUE(leased.ok() && leased->has_value()) << leased.status();
  const store::TaskKey key = (*leased)->key;
  ASSERT_TRUE(Register("b", Genuine()).ok());  // two agree now
  EXPECT_EQ(Recorded(), method::ProfileModelToJson(Genuine()));
  EXPECT_EQ(store_->GetTask(key)->state, store::TaskState::kPending);
  auto results = scheduler_->CompleteTask(
      "vm", {.key = key, .attempt = 1},
      std::vector<store::TrialResult>{{key.job, key.sample, key.layer, 0, 0.5}});
  ASSERT_TRUE(absl::IsFailedPrecondition(results.status())) << results.status();
  EXPECT_NE(results.status().message().find("was dropped"), std::string_view::npos)
      << results.status();
  // Registering again with the recorded summary is accepted.
  EXPECT_TRUE(Register("vm", Genuine()).ok());
  EXPECT_TRUE(scheduler_->Heartbeat("vm", {}, {}).ok());
}

TEST_F(ModelSummaryTest, ARestartKeepsTheRecordedSummary) {
  ASSERT_TRUE(Register("a", Genuine()).ok());
  ASSERT_TRUE(Register("b", Genuine()).ok());
  Open();
  Status refused = Register("vm", Named("x"));
  ASSERT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("name: \"x\""), std::string_view::npos) << refused;
  EXPECT_TRUE(Register("a", Genuine()).ok());
}

TEST_F(ModelSummaryTest, ASummaryStoredByAnEarlierVersionStaysRecorded) {
  ASSERT_TRUE(store_->PutModelSummary(kHash, method::ProfileModelToJson(Genuine())).ok());
  Open();
  EXPECT_TRUE(absl::IsFailedPrecondition(Register("vm", Named("x"))));
  EXPECT_TRUE(Register("genuine", Genuine()).ok());
}

}  // namespace
}  // namespace ripplekv::scheduler
