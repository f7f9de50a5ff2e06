// The results table: grouping, order, intervals, averages and the three renderings (golden
// strings). Interval values were checked with scipy.stats.t.ppf.

#include "eval/results_table.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ripplekv::eval {
namespace {

using ::testing::HasSubstr;

std::vector<ScoreRecord> PaperLikeRecords() {
  return {
      {"snapkv", 128, "passkey", "a", 1.0},  // snapkv at 128 lacks "qa": no average
      {"full", 0, "passkey", "a", 1.0},     {"full", 0, "passkey", "b", 0.0},
      {"full", 0, "qa", "a", 0.5},          {"full", 0, "qa", "b", 0.5},
      {"full", 0, "fidelity/kl", "a", 0.0}, {"snapkv", 64, "passkey", "a", 0.0},
      {"snapkv", 64, "passkey", "b", 1.0},  {"snapkv", 64, "qa", "a", 0.25},
      {"snapkv", 64, "qa", "b", 0.75},
  };
}

TEST(ResultTableTest, MarkdownGolden) {
  auto table = BuildResultTable(PaperLikeRecords());
  ASSERT_TRUE(table.ok()) << table.status();
  // passkey [1, 0]: 12.7062 * 0.7071 / sqrt(2) = 6.3531. full average: SE^2 = 0.25 + 0, df = 1,
  // 12.7062 * 0.5 / 2 = 3.1766. snapkv@64 average: SE^2 = 0.25 + 0.0625, Welch df = 1.4706,
  // t = 6.1881, half-width 6.1881 * sqrt(0.3125) / 2 = 1.7296.
  EXPECT_EQ(RenderMarkdown(*table),
            "| method | budget | passkey (n=2) | qa (n=2) | fidelity/kl (n=1) | average |\n"
            "|:--|--:|--:|--:|--:|--:|\n"
            "| snapkv | 64 | 0.5000 ±6.3531 | 0.5000 ±3.1766 | – | 0.5000 ±1.7296 |\n"
            "| snapkv | 128 | 1.0000 (n=1) | – | – | n/a |\n"
            "| full | full | 0.5000 ±6.3531 | 0.5000 ±0.0000 | 0.0000 | 0.5000 ±3.1766 |\n");
}

TEST(ResultTableTest, AverageIntervalUsesWelchSatterthwaite) {
  auto table = BuildResultTable(PaperLikeRecords());
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->averages.size(), 3u);
  EXPECT_NEAR(table->averages[0].half_width, 1.729630707517766, 1e-9);  // scipy
  EXPECT_NEAR(table->averages[2].half_width, 3.1765511840436735, 1e-9);
}

TEST(ResultTableTest, CsvGoldenQuotesAsRfc4180) {
  const std::vector<ScoreRecord> records = {
      {"a,\"b\"", 16, "t1", "x", 1.0},
      {"a,\"b\"", 16, "t1", "y", 1.0},
      {"a,\"b\"", 16, "line\nbreak", "x", 0.25},
  };
  auto table = BuildResultTable(records);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(RenderCsv(*table),
            "method,budget,task,n,mean,ci95,ci95_low,ci95_high\r\n"
            "\"a,\"\"b\"\"\",16,t1,2,1,0,1,1\r\n"
            "\"a,\"\"b\"\"\",16,\"line\nbreak\",1,0.25,,,\r\n"
            "\"a,\"\"b\"\"\",16,average,3,0.625,,,\r\n");
}

TEST(ResultTableTest, JsonGolden) {
  const std::vector<ScoreRecord> records = {
      {"m", 0, "t1", "x", 1.0},
      {"m", 0, "t1", "y", 1.0},
      {"m", 0, "t2", "x", 0.5},
  };
  auto table = BuildResultTable(records);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(RenderJson(*table), R"({
  "results": [
    {
      "method": "m",
      "budget": 0,
      "task": "t1",
      "n": 2,
      "mean": 1.0,
      "ci95": 0.0,
      "ci95_low": 1.0,
      "ci95_high": 1.0
    },
    {
      "method": "m",
      "budget": 0,
      "task": "t2",
      "n": 1,
      "mean": 0.5,
      "ci95": null,
      "ci95_low": null,
      "ci95_high": null
    }
  ],
  "averages": [
    {
      "method": "m",
      "budget": 0,
      "tasks": 2,
      "n": 3,
      "mean": 0.75,
      "ci95": null,
      "ci95_low": null,
      "ci95_high": null
    }
  ]
}
)");
}

TEST(ResultTableTest, MarkdownEscapesPipes) {
  const std::vector<ScoreRecord> records = {{"a|b", 8, "t", "x", 0.5}};
  auto table = BuildResultTable(records, {.average_exclude_prefix = "", .decimals = 2});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(RenderMarkdown(*table), HasSubstr("| a\\|b | 8 | 0.50 |"));
}

TEST(ResultTableTest, OnlyFidelityTasksGiveNoAverages) {
  const std::vector<ScoreRecord> records = {{"m", 0, "fidelity/kl", "x", 0.1}};
  auto table = BuildResultTable(records);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(table->averages.empty());
  EXPECT_THAT(RenderMarkdown(*table), ::testing::Not(HasSubstr("average")));
  EXPECT_EQ(RenderTable(*table, TableFormat::kMarkdown), RenderMarkdown(*table));
}

TEST(ResultTableTest, RejectsBadRecordsNamingIndexAndField) {
  auto expect_error = [](std::vector<ScoreRecord> records, const std::string& part) {
    auto table = BuildResultTable(records);
    ASSERT_FALSE(table.ok());
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), HasSubstr(part));
  };
  expect_error({{"", 0, "t", "x", 1}}, "score record 0: field \"method\"");
  expect_error({{"m", 0, "t", "x", 1}, {"m", 0, "", "x", 1}}, "score record 1: field \"task\"");
  expect_error({{"m", 0, "average", "x", 1}}, "reserved");
  expect_error({{"m", -1, "t", "x", 1}}, "field \"budget\"");
  expect_error({{"m", 0, "t", "x", std::nan("")}}, "field \"score\"");
  expect_error({{"m", 0, "t", "", 1}}, "field \"example_id\"");
  expect_error({{"m", 0, "t", "x", 1}, {"m", 0, "t", "x", 0}}, "appears twice");
}

TEST(ResultTableTest, JsonReplacesInvalidUtf8InNames) {
  const std::vector<ScoreRecord> records = {{"bad\xFF", 0, "t", "x", 1}};
  auto table = BuildResultTable(records);
  ASSERT_TRUE(table.ok()) << table.status();
  const auto parsed = nlohmann::json::parse(RenderJson(*table));
  EXPECT_EQ(parsed["results"][0]["method"], "bad\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ripplekv::eval
