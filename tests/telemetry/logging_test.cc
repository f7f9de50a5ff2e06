// The daemons' log lines: JSON that parses, with the active ids.
#include "telemetry/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace ripplekv::telemetry {
namespace {

std::vector<nlohmann::json> LogAndParse(const std::function<void()>& log) {
  testing::internal::CaptureStderr();
  log();
  std::istringstream lines(testing::internal::GetCapturedStderr());
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(LoggingTest, JsonLinesCarryTimeSeverityServiceMessageAndIds) {
  ASSERT_TRUE(ConfigureLogging("scheduler", "json").ok());
  const std::vector<nlohmann::json> lines = LogAndParse([] {
    spdlog::info("plain \"quoted\" line\nwith a newline");
    {
      ScopedLogIds job({.job = "7"});
      ScopedLogIds task({.task = "7/0/3", .worker = "w1"});
      spdlog::warn("inside");
    }
    spdlog::error("bad utf-8: \xff\xfe");
  });
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["severity"], "info");
  EXPECT_EQ(lines[0]["service"], "scheduler");
  EXPECT_EQ(lines[0]["msg"], "plain \"quoted\" line\nwith a newline");
  EXPECT_THAT(
      lines[0]["ts"].get<std::string>(),
      testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
  EXPECT_FALSE(lines[0].contains("job"));
  EXPECT_EQ(lines[1]["severity"], "warning");
  EXPECT_EQ(lines[1]["job"], "7");
  EXPECT_EQ(lines[1]["task"], "7/0/3");
  EXPECT_EQ(lines[1]["worker"], "w1");
  EXPECT_FALSE(lines[2].contains("job"));  // the scopes ended
  EXPECT_EQ(lines[2]["severity"], "error");
}

TEST(LoggingTest, TextFormatAndBadFormat) {
  ASSERT_TRUE(ConfigureLogging("worker", "text").ok());
  const std::string out = [] {
    testing::internal::CaptureStderr();
    spdlog::info("hello text");
    return testing::internal::GetCapturedStderr();
  }();
  EXPECT_THAT(out, testing::HasSubstr("hello text"));
  EXPECT_THROW(nlohmann::json::parse(out), nlohmann::json::parse_error);
  EXPECT_EQ(ConfigureLogging("worker", "xml").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::telemetry
