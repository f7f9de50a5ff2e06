// `ripplekv tune` and `ripplekv eval --tuned` end to end on SmolLM2 (needs RIPPLEKV_SMOLLM2_GGUF
// and the committed profile docs/smollm2_profile.json): the choice per budget is the best
// validation score, the test split is refused for tuning, and eval applies the settings on the test
// split only.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

class TuneCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    ASSERT_FALSE(tmp_.path().empty());
  }
  // Small examples: 2 fidelity windows of 160 + 8 tokens.
  std::vector<std::string> Small(std::vector<std::string> args) {
    args.insert(args.end(),
                {"--model", model_, "--profile", kProfile, "--tasks", "fidelity", "--samples", "2",
                 "--context-len", "160", "--continuation", "8", "--threads", "1"});
    return args;
  }
  static constexpr const char* kProfile = RIPPLEKV_SOURCE_DIR "/docs/smollm2_profile.json";
  std::string model_;
  TempDir tmp_;
};

TEST_F(TuneCliTest, ChoosesTheBestValidationScoreAndEvalAppliesItOnTheTestSplit) {
  const fs::path out = tmp_.path() / "tuned.json";
  const CliResult tune = RunCli(tmp_.path(), "tune",
                                Small({"tune", "--budgets", "40,64", "--ratios", "1,2,8",
                                       "--cake-taus", "1:1,0.5:2", "--out", out.string()}),
                                std::chrono::seconds(300));
  ASSERT_EQ(tune.exit_code, 0) << tune.err;
  const nlohmann::json tuned = nlohmann::json::parse(ReadFile(out));
  EXPECT_EQ(tuned["split"], "validation");
  EXPECT_EQ(tuned["objective"], "fidelity/kl");
  EXPECT_TRUE(tuned["lower_is_better"].get<bool>());
  for (const char* b : {"40", "64"}) {
    const nlohmann::json& r = tuned["ripple"]["budgets"][b];
    ASSERT_EQ(r["scores"].size(), 3u) << r.dump();
    double best = 1e300;
    std::string best_name;
    for (const char* name : {"1", "2", "8"}) {  // ties keep the earlier (gentler) ratio
      const double v = r["scores"][name].get<double>();
      EXPECT_GE(v, 0.0);
      if (v < best) best = v, best_name = name;
    }
    EXPECT_EQ(r["ratio"].get<double>(), std::stod(best_name)) << r.dump();
    const nlohmann::json& c = tuned["cake"]["budgets"][b];
    ASSERT_EQ(c["scores"].size(), 2u);
    const bool first = c["scores"]["1:1"].get<double>() <= c["scores"]["0.5:2"].get<double>();
    EXPECT_EQ(c["tau1"].get<double>(), first ? 1.0 : 0.5) << c.dump();
  }
  EXPECT_NE(tune.out.find("budget 40"), std::string::npos) << tune.out;

  // eval --tuned: the test split, ripple at its tuned ratio and CAKE at its tuned temperatures.
  const fs::path records = tmp_.path() / "records.jsonl";
  const CliResult eval =
      RunCli(tmp_.path(), "eval",
             Small({"eval", "--methods", "snapkv,ripple+snapkv,cake", "--budgets", "40,64",
                    "--tuned", out.string(), "--records-out", records.string(), "--json"}),
             std::chrono::seconds(300));
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const nlohmann::json table = nlohmann::json::parse(eval.out);
  int cake_rows = 0;
  for (const auto& row : table["results"]) cake_rows += row["method"] == "cake";
  EXPECT_EQ(cake_rows, 2 * 3);  // 2 budgets x 3 fidelity scores, one row each
  EXPECT_NE(ReadFile(records).find("\"split\":\"test\""), std::string::npos);
}

TEST_F(TuneCliTest, TuningOnTheTestSplitAndEvaluatingTheValidationSplitAreRefused) {
  const fs::path out = tmp_.path() / "tuned.json";
  const CliResult on_test =
      RunCli(tmp_.path(), "tune-test",
             Small({"tune", "--budgets", "40", "--split", "test", "--out", out.string()}),
             std::chrono::seconds(60));
  EXPECT_EQ(on_test.exit_code, 2) << on_test.err;
  EXPECT_NE(on_test.err.find("validation split only"), std::string::npos) << on_test.err;

  const CliResult tune = RunCli(tmp_.path(), "tune",
                                Small({"tune", "--budgets", "40", "--ratios", "1,2", "--cake-taus",
                                       "none", "--out", out.string()}),
                                std::chrono::seconds(300));
  ASSERT_EQ(tune.exit_code, 0) << tune.err;
  const CliResult on_validation =
      RunCli(tmp_.path(), "eval-validation",
             Small({"eval", "--methods", "ripple+snapkv", "--budgets", "40", "--tuned",
                    out.string(), "--split", "validation"}),
             std::chrono::seconds(60));
  EXPECT_EQ(on_validation.exit_code, 2) << on_validation.err;
  EXPECT_NE(on_validation.err.find("evaluate on test"), std::string::npos) << on_validation.err;
  const CliResult other_budget = RunCli(
      tmp_.path(), "eval-budget",
      Small({"eval", "--methods", "ripple+snapkv", "--budgets", "64", "--tuned", out.string()}),
      std::chrono::seconds(60));
  EXPECT_EQ(other_budget.exit_code, 2) << other_budget.err;
  EXPECT_NE(other_budget.err.find("no tuned ratio for budget 64"), std::string::npos)
      << other_budget.err;
  // A ratio tuned for min-max maps says nothing about rank-normalized ones.
  const CliResult other_normalization =
      RunCli(tmp_.path(), "eval-normalization",
             Small({"eval", "--methods", "ripple+snapkv", "--budgets", "40", "--tuned",
                    out.string(), "--normalization", "rank"}),
             std::chrono::seconds(60));
  EXPECT_EQ(other_normalization.exit_code, 2) << other_normalization.err;
  EXPECT_NE(other_normalization.err.find("tuned with --normalization minmax"), std::string::npos)
      << other_normalization.err;
}

TEST_F(TuneCliTest, NormalizationShapesTheMapsAndIsRecordedWithTheChoice) {
  const fs::path out = tmp_.path() / "tuned.json";
  const CliResult tune = RunCli(tmp_.path(), "tune",
                                Small({"tune", "--budgets", "40", "--ratios", "2,8", "--cake-taus",
                                       "none", "--normalization", "rank", "--out", out.string()}),
                                std::chrono::seconds(300));
  ASSERT_EQ(tune.exit_code, 0) << tune.err;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out))["profile"]["normalization"], "rank");
  // The same examples and ratio, two normalizations: the maps differ, so the scores do.
  auto kl = [&](const std::string& normalization) {
    const CliResult eval =
        RunCli(tmp_.path(), "eval-" + normalization,
               Small({"eval", "--methods", "ripple+snapkv", "--budgets", "40", "--ratio", "8",
                      "--normalization", normalization, "--json"}),
               std::chrono::seconds(300));
    EXPECT_EQ(eval.exit_code, 0) << eval.err;
    const nlohmann::json table = nlohmann::json::parse(eval.out);
    for (const auto& row : table["results"]) {
      if (row["task"] == "fidelity/kl") return row["mean"].get<double>();
    }
    ADD_FAILURE() << "no fidelity/kl row: " << eval.out;
    return -1.0;
  };
  const double minmax = kl("minmax"), rank = kl("rank");
  EXPECT_GE(minmax, 0.0);
  EXPECT_GE(rank, 0.0);
  EXPECT_NE(minmax, rank);
  const CliResult applied = RunCli(tmp_.path(), "eval-tuned-rank",
                                   Small({"eval", "--methods", "ripple+snapkv", "--budgets", "40",
                                          "--tuned", out.string(), "--normalization", "rank"}),
                                   std::chrono::seconds(300));
  EXPECT_EQ(applied.exit_code, 0) << applied.err;
}

}  // namespace
}  // namespace ripplekv::testing
