#include "scheduler/core/job_plan.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace ripplekv::scheduler {
namespace {

store::JobSpec GoodSpec() {
  store::JobSpec spec;
  spec.model_hash = "abc123";
  spec.params.alpha = 0.5;
  spec.params.trials = 3;
  spec.params.samples = 4;
  spec.params.context_len = 64;
  spec.params.probe_len = 8;
  return spec;
}

void ExpectBadField(const store::JobSpec& spec, int64_t n_layers, const std::string& field) {
  Status s = ValidateJobSpec(spec, n_layers);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(field), std::string_view::npos) << s;
}

TEST(JobPlanTest, PlansOneTaskPerSampleAndLayerSampleMajor) {
  store::JobSpec spec = GoodSpec();
  std::vector<store::PlannedTask> tasks = PlanTasks(spec, 30);
  ASSERT_EQ(tasks.size(), 4u * 30u);
  EXPECT_EQ(tasks[0].sample, 0u);
  EXPECT_EQ(tasks[0].layer, 0u);
  EXPECT_EQ(tasks[30].sample, 1u);
  EXPECT_EQ(tasks[30].layer, 0u);
  EXPECT_EQ(tasks.back().sample, 3u);
  EXPECT_EQ(tasks.back().layer, 29u);
}

TEST(JobPlanTest, ExplicitLayersAreSortedAndOnlyThoseArePlanned) {
  store::JobSpec spec = GoodSpec();
  spec.params.layers = {7, 2, 5};
  ASSERT_TRUE(ValidateJobSpec(spec, 30).ok());
  std::vector<store::PlannedTask> tasks = PlanTasks(spec, 30);
  ASSERT_EQ(tasks.size(), 12u);
  EXPECT_EQ(tasks[0].layer, 2u);
  EXPECT_EQ(tasks[1].layer, 5u);
  EXPECT_EQ(tasks[2].layer, 7u);
}

TEST(JobPlanTest, RejectsBadFieldsNamingThem) {
  EXPECT_TRUE(ValidateJobSpec(GoodSpec(), 30).ok());
  store::JobSpec s = GoodSpec();
  s.params.alpha = -0.1;
  ExpectBadField(s, 30, "params.alpha");
  s.params.alpha = std::numeric_limits<double>::quiet_NaN();
  ExpectBadField(s, 30, "params.alpha");
  s = GoodSpec();
  s.params.trials = 0;
  ExpectBadField(s, 30, "params.trials");
  s = GoodSpec();
  s.params.samples = 0;
  ExpectBadField(s, 30, "params.samples");
  s = GoodSpec();
  s.params.probe_len = 64;
  ExpectBadField(s, 30, "params.probe_len");
  s = GoodSpec();
  s.params.layers = {3, 30};
  ExpectBadField(s, 30, "params.layers[1]");
  s.params.layers = {3, 3};
  ExpectBadField(s, 30, "params.layers[1]");
  s = GoodSpec();
  s.model_hash.clear();
  ExpectBadField(s, 30, "model_hash");
  s = GoodSpec();
  s.data_inline = "x";
  s.data_path = "/d.jsonl";
  ExpectBadField(s, 30, "data_path");
  ExpectBadField(GoodSpec(), 0, "model_n_layers");
}

TEST(JobPlanTest, DataFieldsMustFitTheSource) {
  store::JobSpec s = GoodSpec();
  for (const char* name : {"tom-sawyer", "mixed", "sherlock-holmes", "code", "docs"}) {
    s.data_builtin = name;
    EXPECT_TRUE(ValidateJobSpec(s, 30).ok()) << name;
  }
  s.data_builtin = "war-and-peace";
  ExpectBadField(s, 30, "data_builtin");
  s = GoodSpec();
  s.data_path = "/d.txt";
  s.data_builtin = "tom-sawyer";
  ExpectBadField(s, 30, "data_builtin");
  s = GoodSpec();
  s.data_format = store::DataFormat::kJsonl;  // the built-in corpus is plain text
  ExpectBadField(s, 30, "data_format");
  s = GoodSpec();
  s.data_inline = "{\"text\": \"x\"}\n";  // inline data needs its kind
  ExpectBadField(s, 30, "data_format");
  s.data_format = store::DataFormat::kJsonl;
  EXPECT_TRUE(ValidateJobSpec(s, 30).ok());
}

TEST(JobPlanTest, UntilStableNeedsRoundsOfTwoSamplesAndACapNotBelowThem) {
  store::JobSpec s = GoodSpec();
  s.params.until_stable = true;
  s.params.samples = 4;
  s.params.max_samples = 4;
  EXPECT_TRUE(ValidateJobSpec(s, 30).ok());
  s.params.max_samples = 3;
  ExpectBadField(s, 30, "params.max_samples");
  s.params.samples = 1;
  s.params.max_samples = 64;
  ExpectBadField(s, 30, "params.samples");
  // Without until_stable the cap means nothing and one sample is a job.
  s.params.until_stable = false;
  s.params.max_samples = 0;
  EXPECT_TRUE(ValidateJobSpec(s, 30).ok());
}

TEST(JobPlanTest, RoundsStepBySamplesUpToTheCapAndPlanOnlyTheirOwnSamples) {
  store::JobSpec s = GoodSpec();
  s.params.until_stable = true;
  s.params.samples = 4;
  s.params.max_samples = 10;
  s.params.layers = {3, 1};
  EXPECT_EQ(MaxJobSamples(s.params), 10u);
  EXPECT_EQ(NextRoundSamples(s.params, 4), 8u);
  EXPECT_EQ(NextRoundSamples(s.params, 8), 10u);   // the last round is cut at the cap
  EXPECT_EQ(NextRoundSamples(s.params, 10), 10u);  // capped: no further round
  std::vector<store::PlannedTask> round = PlanRound(s, 30, 8, 10);
  ASSERT_EQ(round.size(), 4u);
  EXPECT_EQ(round[0].sample, 8u);
  EXPECT_EQ(round[0].layer, 1u);
  EXPECT_EQ(round[1].layer, 3u);
  EXPECT_EQ(round[3].sample, 9u);
  EXPECT_TRUE(PlanRound(s, 30, 10, 10).empty());
  EXPECT_EQ(PlanTasks(s, 30).size(), 8u);  // the first round only
  s.params.until_stable = false;
  EXPECT_EQ(MaxJobSamples(s.params), 4u);
}

}  // namespace
}  // namespace ripplekv::scheduler
