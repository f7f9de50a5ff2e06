// `ripplekv tune` and `ripplekv eval --tuned` end to end on SmolLM2 (needs RIPPLEKV_SMOLLM2_GGUF
// and the committed profile docs/smollm2_profile.json): the choice per budget is the best
// validation score, the test split is refused for tuning, and eval applies the settings on the test
// split only.

#include <gtest/gtest.h>

#include <set>
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

// The mean of `task` for `method` in a --json table; -1 (and a failure) when absent.
double MeanOf(const std::string& json, const std::string& method, const std::string& task) {
  const nlohmann::json table = nlohmann::json::parse(json);
  for (const auto& row : table["results"]) {
    if (row["method"] == method && row["task"] == task) return row["mean"].get<double>();
  }
  ADD_FAILURE() << "no " << method << " " << task << " row: " << json;
  return -1.0;
}

TEST_F(TuneCliTest, SettingsTunedPerSelectionGoToTheirMethods) {
  const fs::path h2o = tmp_.path() / "h2o.json", snap = tmp_.path() / "snap.json";
  const CliResult tune_h2o = RunCli(
      tmp_.path(), "tune-h2o",
      Small({"tune", "--budgets", "40", "--selector", "h2o", "--ratios", "1,8", "--cake-method",
             "cake+h2o", "--cake-taus", "1:1,0.5:2", "--out", h2o.string()}),
      std::chrono::seconds(300));
  ASSERT_EQ(tune_h2o.exit_code, 0) << tune_h2o.err;
  const nlohmann::json h2o_json = nlohmann::json::parse(ReadFile(h2o));
  EXPECT_EQ(h2o_json["ripple"]["selector"], "h2o");
  EXPECT_EQ(h2o_json["cake"]["method"], "cake+h2o");
  EXPECT_NE(tune_h2o.out.find("cake+h2o tau1:tau2"), std::string::npos) << tune_h2o.out;
  const CliResult tune_snap = RunCli(
      tmp_.path(), "tune-snap",
      Small({"tune", "--budgets", "40", "--ratios", "none", "--cake-method", "cake+snapkv",
             "--cake-taus", "1:1", "--out", snap.string()}),
      std::chrono::seconds(300));
  ASSERT_EQ(tune_snap.exit_code, 0) << tune_snap.err;
  const nlohmann::json snap_json = nlohmann::json::parse(ReadFile(snap));
  EXPECT_FALSE(snap_json.contains("ripple"));
  EXPECT_EQ(snap_json["cake"]["method"], "cake+snapkv");

  // Both files at once: ripple+h2o at the ratio tuned with H2O, cake+snapkv at the temperatures
  // tuned with SnapKV (1:1, so it scores as the untuned default).
  const CliResult tuned = RunCli(
      tmp_.path(), "eval-tuned",
      Small({"eval", "--methods", "ripple+h2o,cake+h2o,cake+snapkv", "--budgets", "40", "--tuned",
             h2o.string(), "--tuned", snap.string(), "--json"}),
      std::chrono::seconds(300));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  const double ratio = h2o_json["ripple"]["budgets"]["40"]["ratio"].get<double>();
  const CliResult plain = RunCli(
      tmp_.path(), "eval-plain",
      Small({"eval", "--methods", "ripple+h2o,cake+snapkv", "--budgets", "40", "--ratio",
             std::to_string(ratio), "--json"}),
      std::chrono::seconds(300));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(MeanOf(tuned.out, "ripple+h2o", "fidelity/kl"),
            MeanOf(plain.out, "ripple+h2o", "fidelity/kl"));
  EXPECT_EQ(MeanOf(tuned.out, "cake+snapkv", "fidelity/kl"),
            MeanOf(plain.out, "cake+snapkv", "fidelity/kl"));

  const CliResult nothing = RunCli(
      tmp_.path(), "tune-nothing",
      Small({"tune", "--budgets", "40", "--ratios", "none", "--cake-taus", "none", "--out",
             (tmp_.path() / "x.json").string()}),
      std::chrono::seconds(60));
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.err.find("nothing to tune"), std::string::npos) << nothing.err;
  const CliResult not_cake = RunCli(
      tmp_.path(), "tune-not-cake",
      Small({"tune", "--budgets", "40", "--cake-method", "snapkv", "--out",
             (tmp_.path() / "x.json").string()}),
      std::chrono::seconds(60));
  EXPECT_EQ(not_cake.exit_code, 2);
  EXPECT_NE(not_cake.err.find("not a CAKE allocation"), std::string::npos) << not_cake.err;
}

TEST_F(TuneCliTest, ControlsRunAsMethodsFromTheSameProfileAndRatio) {
  const CliResult eval = RunCli(
      tmp_.path(), "eval-controls",
      Small({"eval", "--methods", "ripple+snapkv,ripple-perm+snapkv,ripple-rev+snapkv,spike2+snapkv",
             "--control-seeds", "3", "--budgets", "40", "--ratio", "8", "--json"}),
      std::chrono::seconds(300));
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  std::set<std::string> methods;
  const nlohmann::json table = nlohmann::json::parse(eval.out);
  for (const auto& row : table["results"]) methods.insert(row["method"].get<std::string>());
  EXPECT_EQ(methods, (std::set<std::string>{"ripple+snapkv", "ripple-perm1+snapkv",
                                            "ripple-perm2+snapkv", "ripple-perm3+snapkv",
                                            "ripple-rev+snapkv", "spike2+snapkv"}));
  // A permuted profile's map keeps other tokens than the profile's own.
  EXPECT_NE(MeanOf(eval.out, "ripple+snapkv", "fidelity/kl"),
            MeanOf(eval.out, "ripple-perm1+snapkv", "fidelity/kl"));
  // Controls need the profile: a map file has no layer values to permute.
  const CliResult no_profile =
      RunCli(tmp_.path(), "eval-control-map-file",
             {"eval", "--model", model_, "--methods", "ripple-rev+snapkv", "--budget-map",
              (tmp_.path() / "none.json").string()},
             std::chrono::seconds(60));
  EXPECT_EQ(no_profile.exit_code, 2) << no_profile.err;
  EXPECT_NE(no_profile.err.find("needs --profile"), std::string::npos) << no_profile.err;
}

TEST_F(TuneCliTest, H2oRecentWindowIsAParameter) {
  // The paper's half of the budget and KVCache-Factory's 8 recent tokens keep other tokens.
  auto kl = [&](const std::string& recent) {
    const CliResult eval = RunCli(
        tmp_.path(), "eval-h2o-" + recent,
        Small({"eval", "--methods", "h2o", "--budgets", "40", "--h2o-recent", recent, "--json"}),
        std::chrono::seconds(300));
    EXPECT_EQ(eval.exit_code, 0) << eval.err;
    return MeanOf(eval.out, "h2o", "fidelity/kl");
  };
  const double half = kl("0"), eight = kl("8");
  EXPECT_GE(half, 0.0);
  EXPECT_GE(eight, 0.0);
  EXPECT_NE(half, eight);
  const CliResult negative =
      RunCli(tmp_.path(), "eval-h2o-negative",
             Small({"eval", "--methods", "h2o", "--budgets", "40", "--h2o-recent", "-1"}),
             std::chrono::seconds(60));
  EXPECT_EQ(negative.exit_code, 2) << negative.err;
}

}  // namespace
}  // namespace ripplekv::testing
