// The one JSONL reader (method/jsonl.h): line cutting (LF, CRLF, a last line without a newline),
// blank lines, the byte-order mark, 1-based line numbers in every error, the line-length limit and
// stopping early.

#include "method/jsonl.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ripplekv::method {
namespace {

// What the reader yields: "where=value" per line.
struct Seen {
  Status status;
  std::vector<std::string> lines;
};

Seen Read(std::string_view text, const JsonlOptions& options = {}) {
  Seen seen;
  seen.status =
      ForEachJsonlLine(text, "f.jsonl", options, [&](const JsonlLine& line) -> StatusOr<JsonlNext> {
        EXPECT_EQ(line.where, "f.jsonl:" + std::to_string(line.number));
        seen.lines.push_back(line.where + "=" + line.value.dump());
        return JsonlNext::kMore;
      });
  return seen;
}

TEST(JsonlTest, YieldsEachObjectWithItsLineNumber) {
  const Seen s = Read("{\"a\":1}\n{\"a\":2}\n");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:1={\"a\":1}", "f.jsonl:2={\"a\":2}"}));
}

TEST(JsonlTest, LastLineWithoutNewlineCounts) {
  const Seen s = Read("{\"a\":1}\n{\"a\":2}");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:1={\"a\":1}", "f.jsonl:2={\"a\":2}"}));
}

TEST(JsonlTest, BlankLinesAreSkippedButCounted) {
  const Seen s = Read("\n  \t\n{\"a\":1}\n\n\f\v\n{\"a\":2}\n\n");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:3={\"a\":1}", "f.jsonl:6={\"a\":2}"}));
}

TEST(JsonlTest, EmptyTextYieldsNothing) {
  const Seen s = Read("");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_TRUE(s.lines.empty());
}

TEST(JsonlTest, BlankCharsAreTheCallersChoice) {
  // With only space and tab blank, a form feed line is JSON (and invalid).
  const Seen s = Read("{\"a\":1}\n\f\n", {.blank_chars = " \t"});
  EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::string(s.status.message()).starts_with("f.jsonl:2: invalid JSON at byte 1: "))
      << s.status;
}

TEST(JsonlTest, CrlfAndBomAreDropped) {
  const Seen s = Read("\xEF\xBB\xBF{\"a\":1}\r\n\r\n{\"a\":\"x\"}\r\n");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:1={\"a\":1}", "f.jsonl:3={\"a\":\"x\"}"}));
}

TEST(JsonlTest, BomStartingALaterLineIsLeftToTheParser) {
  // nlohmann::json skips a byte-order mark at the start of what it parses, so one starting a
  // later line is accepted too; a BOM elsewhere in a line is invalid JSON.
  Seen s = Read("{\"a\":1}\n\xEF\xBB\xBF{\"a\":2}\n");
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:1={\"a\":1}", "f.jsonl:2={\"a\":2}"}));
  s = Read("{\"a\":1}\n \xEF\xBB\xBF{\"a\":2}\n");
  EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::string(s.status.message()).starts_with("f.jsonl:2: invalid JSON at byte 2: "))
      << s.status;
}

TEST(JsonlTest, InvalidJsonNamesFileLineAndByte) {
  const Seen s = Read("{\"a\":1}\n\n{\"a\":}\n{\"a\":3}\n");
  EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(s.status.message());
  EXPECT_TRUE(message.starts_with("f.jsonl:3: invalid JSON at byte 6: ")) << message;
  EXPECT_NE(message.find("syntax error"), std::string::npos) << message;
  EXPECT_EQ(s.lines, (std::vector<std::string>{"f.jsonl:1={\"a\":1}"}));  // stopped at line 3
}

TEST(JsonlTest, NonObjectIsAnErrorInTheCallersWords) {
  Seen s = Read("[1,2]\n");
  EXPECT_EQ(s.status.message(), "f.jsonl:1: expected a JSON object, got array");
  s = Read("{}\n\"x\"\n", {.object_description = "a JSON object with a string field \"text\""});
  EXPECT_EQ(s.status.message(),
            "f.jsonl:2: expected a JSON object with a string field \"text\", got string");
}

TEST(JsonlTest, OverLongLineIsAnError) {
  // The limit is on the line as stored: 10 bytes pass, 11 fail, even when the 11th is the \r.
  const std::string ten = "{\"a\":\"12\"}";
  ASSERT_EQ(ten.size(), 10u);
  EXPECT_TRUE(Read(ten + "\n" + ten, {.max_line_bytes = 10}).status.ok());
  Seen s = Read(ten + "\n" + ten + "\r\n", {.max_line_bytes = 10});
  EXPECT_EQ(s.status.message(), "f.jsonl:2: line longer than 10 bytes");
  EXPECT_EQ(s.lines.size(), 1u);
  s = Read(ten + "\n" + std::string(11, ' ') + "\n", {.max_line_bytes = 10});  // blank, still long
  EXPECT_EQ(s.status.message(), "f.jsonl:2: line longer than 10 bytes");
  EXPECT_TRUE(Read(ten + " \n" + ten).status.ok());  // 0: no limit
}

TEST(JsonlTest, StopEndsTheReadAndLaterLinesAreNotLookedAt) {
  std::vector<int64_t> numbers;
  const Status status =
      ForEachJsonlLine("{\"a\":1}\n{\"a\":2}\nnot json\n", "f", {},
                       [&](const JsonlLine& line) -> StatusOr<JsonlNext> {
                         numbers.push_back(line.number);
                         return numbers.size() == 2 ? JsonlNext::kStop : JsonlNext::kMore;
                       });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(numbers, (std::vector<int64_t>{1, 2}));
}

TEST(JsonlTest, VisitorErrorIsReturnedAsIs) {
  const Status status =
      ForEachJsonlLine("{}\n{}\n", "f", {}, [&](const JsonlLine& line) -> StatusOr<JsonlNext> {
        if (line.number == 2) return absl::NotFoundError(line.where + ": field \"x\" is missing");
        return JsonlNext::kMore;
      });
  EXPECT_EQ(status, absl::NotFoundError("f:2: field \"x\" is missing"));
}

}  // namespace
}  // namespace ripplekv::method
