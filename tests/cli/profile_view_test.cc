// The profile table of `ripplekv profile get`, `submit --wait` and `calibrate`: a profile with a
// verification block shows its counts and every disagreement; one without shows no such line.

#include "cli/profile_view.h"

#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "method/profile.h"

namespace ripplekv::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Two layers, two samples, no stability block.
method::SensitivityProfile TwoLayerProfile() {
  method::SensitivityProfile p;
  p.model = {.hash = "ab12",
             .architecture = "llama",
             .n_layers = 2,
             .n_kv_heads = 1,
             .head_dim = 8,
             .d_model = 8,
             .vocab_size = 10};
  p.params = {
      {.alpha = 0.1, .trials = 1, .samples = 2, .context_len = 8, .probe_len = 2, .layers = {0, 1}},
      "test"};  // data_source
  p.layers = {{.layer = 0, .mean_kl = 0.5, .count = 2, .per_sample_mean = {0.5, 0.5}},
              {.layer = 1, .mean_kl = 1.0, .count = 2, .per_sample_mean = {1.0, 1.0}}};
  p.created_at = "2025-01-31T12:00:00Z";
  return p;
}

std::string Table(const method::SensitivityProfile& profile) {
  ::testing::internal::CaptureStdout();
  PrintProfileTable(profile, 4.0);
  return ::testing::internal::GetCapturedStdout();
}

TEST(ProfileViewTest, VerificationBlockShowsItsCountsAndEveryDisagreement) {
  method::SensitivityProfile p = TwoLayerProfile();
  ASSERT_TRUE(method::ValidateProfile(p).ok());
  EXPECT_THAT(Table(p), Not(HasSubstr("verification")));

  p.verification =
      method::ProfileVerification{.fraction = 0.05,
                                  .tasks_verified = 3,
                                  .tasks_unverified = 1,
                                  .tasks_recomputed = 2,
                                  .disagreements = {{.sample = 1,
                                                     .layer = 0,
                                                     .outvoted_worker = "bad-host/cuda:0",
                                                     .agreeing_workers = {"a/cpu", "b/cpu"}}}};
  ASSERT_TRUE(method::ValidateProfile(p).ok());
  const std::string table = Table(p);
  EXPECT_THAT(table, HasSubstr("verification (5% of tasks run again on a second worker): 3 tasks "
                               "verified, 1 unverified (no second worker), 2 recomputed, 1 "
                               "disagreement\n"));
  EXPECT_THAT(table, HasSubstr("  sample 1 layer 0: bad-host/cuda:0 outvoted by a/cpu, b/cpu "
                               "(quarantined)\n"));

  p.verification->fraction = 1.0;
  p.verification->disagreements.clear();
  EXPECT_THAT(Table(p), HasSubstr("verification (100% of tasks run again on a second worker): 3 "
                                  "tasks verified, 1 unverified (no second worker), 2 recomputed, "
                                  "0 disagreements\n"));
}

TEST(ProfileViewTest, ObjectiveLineAndAResponseProfilesKlAtEveryBudget) {
  method::SensitivityProfile p = TwoLayerProfile();
  EXPECT_THAT(Table(p), HasSubstr("objective noise"));
  EXPECT_THAT(Table(p), Not(HasSubstr("snapkv")));

  // The same two layers measured as a response to H2O at budgets 4 and 8 (the full context).
  p.params.objective = method::Objective::kResponse;
  p.params.selector = method::ResponseSelector::kH2o;
  p.params.budgets = {4, 8};
  p.params.trials = 2;
  p.layers[0].count = p.layers[1].count = 4;
  p.layers[0].response = {{.budget = 4, .mean_kl = 1.0}, {.budget = 8, .mean_kl = 0.0}};
  p.layers[1].response = {{.budget = 4, .mean_kl = 2.0}, {.budget = 8, .mean_kl = 0.0}};
  ASSERT_TRUE(method::ValidateProfile(p).ok()) << method::ValidateProfile(p);
  const std::string table = Table(p);
  EXPECT_THAT(table, HasSubstr("objective response"));
  EXPECT_THAT(table, HasSubstr("h2o"));
  // The plot: a line per compressed budget, and the response map's shares on the right axis.
  const std::string svg_path = ::testing::TempDir() + "/response_profile.svg";
  ASSERT_TRUE(WriteProfilePlot(p, 4.0, svg_path).ok());
  std::ifstream in(svg_path);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(svg, HasSubstr("b = 4"));
  EXPECT_THAT(svg, Not(HasSubstr("b = 8")));  // the full cache, 0 everywhere, is not drawn
  EXPECT_THAT(svg, HasSubstr("budget share b_l / B of the response map, B = 8"));
  EXPECT_THAT(svg, Not(HasSubstr("r^n")));
  // Each layer's row names its KL at each budget of the grid.
  EXPECT_THAT(table, HasSubstr("KL by budget (nats)\nlayer          4          8\n"
                               "    0          1          0\n    1          2          0\n"));
  EXPECT_THAT(table, Not(HasSubstr("per KV head (nats")));

  // Measured per KV head (2 of them): each head's row, and the objective says so.
  p.model.n_kv_heads = 2;
  p.params.kv_heads = 2;
  p.params.trials = 4;
  p.layers[0].count = p.layers[1].count = 8;
  p.layers[0].head_response = {{{.budget = 4, .mean_kl = 0.25}, {.budget = 8, .mean_kl = 0.0}},
                               {{.budget = 4, .mean_kl = 0.75}, {.budget = 8, .mean_kl = 0.0}}};
  p.layers[1].head_response = {{{.budget = 4, .mean_kl = 1.5}, {.budget = 8, .mean_kl = 0.0}},
                               {{.budget = 4, .mean_kl = 0.5}, {.budget = 8, .mean_kl = 0.0}}};
  ASSERT_TRUE(method::ValidateProfile(p).ok()) << method::ValidateProfile(p);
  const std::string heads = Table(p);
  EXPECT_THAT(heads, HasSubstr("= full cache; each of 2 KV heads alone)"));
  EXPECT_THAT(heads,
              HasSubstr("KL by budget per KV head (nats; each layer's row above is their "
                        "sum)\nlayer head          4          8\n"
                        "    0    0       0.25          0\n    0    1       0.75          0\n"
                        "    1    0        1.5          0\n    1    1        0.5          0\n"));
}

}  // namespace
}  // namespace ripplekv::cli
