// `ripplekv eval` end to end on SmolLM2 (needs RIPPLEKV_SMOLLM2_GGUF; the books come from the
// Debian package): the JSON table has a row per method x budget x task, the per-example records
// agree with it, a profile gives ripple+snapkv, and bad input is one error line with exit code 2.

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

class EvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
    ASSERT_FALSE(tmp_.path().empty());
  }
  CliResult Eval(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"eval",          "--model",   model_, "--samples", "2",
                                     "--prompt-len",  "200",       "--context-len", "160",
                                     "--continuation", "8",        "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(tmp_.path(), name, args, std::chrono::seconds(300));
  }
  std::string model_;
  TempDir tmp_;
};

TEST_F(EvalCliTest, JsonTableAndRecordsCoverEveryMethodBudgetAndTask) {
  const fs::path records = tmp_.path() / "records.jsonl";
  const CliResult r = Eval("eval", {"--methods", "full,snapkv,streaming", "--budgets", "40,80",
                                    "--tasks", "passkey,fidelity", "--json", "--records-out",
                                    records.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("examples/min"), std::string::npos) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << r.out;
  // full once (budget 0) + 2 methods x 2 budgets, each with passkey and 3 fidelity rows.
  EXPECT_EQ(table["results"].size(), 5u * 4u);
  std::map<std::tuple<std::string, int, std::string>, std::pair<int, double>> sums;
  std::istringstream lines(ReadFile(records));
  std::string line;
  size_t count = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line);
    auto& [n, sum] = sums[{rec["method"], rec["budget"].get<int>(), rec["task"]}];
    ++n;
    sum += rec["score"].get<double>();
    if (rec["task"] == "passkey") EXPECT_TRUE(rec.contains("prediction")) << line;
    ++count;
  }
  EXPECT_EQ(count, 5u * 4u * 2u);  // two examples per task
  for (const auto& row : table["results"]) {
    const auto it = sums.find({row["method"], row["budget"].get<int>(), row["task"]});
    ASSERT_NE(it, sums.end()) << row.dump();
    EXPECT_EQ(row["n"], it->second.first);
    EXPECT_NEAR(row["mean"].get<double>(), it->second.second / it->second.first, 1e-12);
  }
}

TEST_F(EvalCliTest, BadInputIsOneErrorLineAndExitCodeTwo) {
  for (const auto& [name, extra, needle] :
       std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>{
           {"unknown-method", {"--methods", "snapkv,quantum"}, "quantum"},
           {"unknown-task", {"--tasks", "trivia"}, "trivia"},
           {"ripple-without-profile", {"--methods", "ripple+snapkv"}, "--profile"},
           {"bad-budget", {"--budgets", "64,0"}, "--budgets"}}) {
    SCOPED_TRACE(name);
    const CliResult r = Eval(name, extra);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("ripplekv: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ripplekv::testing
