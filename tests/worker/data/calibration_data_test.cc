// Calibration data: JSONL and plain-text samples (from files and from memory), skip reports,
// errors, the spread order of plain-text windows, the built-in sets.
// The tests use a byte-level vocabulary without merges, where the token id of each byte is the
// byte itself, so expected windows can be written as strings; the built-in sets are read with it
// too (skipped when their Debian package is missing). builtin_data_smollm2_test checks the
// built-in sets with the real tokenizer.

#include "worker/data/calibration_data.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Token ids of a string under the byte vocabulary.
std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

class CalibrationDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = CreateTokenizer(testing::ByteLevelSpec({}));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (std::string("calibration_data_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, std::string_view bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  StatusOr<CalibrationSet> Load(const std::string& path, int samples, int context, int probe,
                                bool strict = false) {
    return LoadCalibrationData(
        path, *tokenizer_,
        {.samples = samples, .context_len = context, .probe_len = probe, .strict = strict});
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::filesystem::path dir_;
};

TEST_F(CalibrationDataTest, JsonlTextLineGivesItsFirstContextAndProbeTokens) {
  const std::string path =
      Write("d.jsonl", "{\"text\": \"abcdefghij\"}\n{\"text\": \"0123456\"}\n");
  auto set = Load(path, 2, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(2));
  EXPECT_EQ(set->samples[0].index, 0);
  EXPECT_EQ(set->samples[0].context, Bytes("abcd"));
  EXPECT_EQ(set->samples[0].probe, Bytes("ef"));
  EXPECT_EQ(set->samples[0].source, path + ":1");
  EXPECT_EQ(set->samples[1].index, 1);
  EXPECT_EQ(set->samples[1].context, Bytes("0123"));
  EXPECT_EQ(set->samples[1].probe, Bytes("45"));
  EXPECT_EQ(set->samples[1].source, path + ":2");
  EXPECT_TRUE(set->skipped.empty());
}

TEST_F(CalibrationDataTest, JsonlContinuationLineTakesContextTailAndContinuationHead) {
  const std::string path =
      Write("d.jsonl", "{\"id\": 7, \"context\": \"0123456789\", \"continuation\": \" xyz\"}\n");
  auto set = Load(path, 1, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(1));
  EXPECT_EQ(set->samples[0].context, Bytes("6789"));
  EXPECT_EQ(set->samples[0].probe, Bytes(" x"));
  EXPECT_EQ(set->samples[0].source, path + ":1");
}

TEST_F(CalibrationDataTest, JsonlMixesBothShapesAndReadsCrlfAndUnterminatedLastLine) {
  const std::string path =
      Write("d.ndjson",
            "{\"context\": \"abcdef\", \"continuation\": \"XYZ\"}\r\n{\"text\": \"mnopqrs\"}");
  auto set = Load(path, 2, 3, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(2));
  EXPECT_EQ(set->samples[0].context, Bytes("def"));
  EXPECT_EQ(set->samples[0].probe, Bytes("XY"));
  EXPECT_EQ(set->samples[1].context, Bytes("mno"));
  EXPECT_EQ(set->samples[1].probe, Bytes("pq"));
  EXPECT_EQ(set->samples[1].source, path + ":2");
}

// 26 bytes make 4 windows of 6 (2 bytes left over); seed 0 orders them 3, 2, 0, 1.
TEST_F(CalibrationDataTest, PlainTextTakesNonOverlappingWindowsInSpreadOrder) {
  const std::string path = Write("book.txt", "abcdefghijklmnopqrstuvwxyz");
  auto set = Load(path, 4, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(4));
  EXPECT_EQ(set->samples[0].context, Bytes("stuv"));
  EXPECT_EQ(set->samples[0].probe, Bytes("wx"));
  EXPECT_EQ(set->samples[0].source, path + "@18");
  EXPECT_EQ(set->samples[1].context, Bytes("mnop"));
  EXPECT_EQ(set->samples[1].probe, Bytes("qr"));
  EXPECT_EQ(set->samples[1].source, path + "@12");
  EXPECT_EQ(set->samples[2].context, Bytes("abcd"));
  EXPECT_EQ(set->samples[2].probe, Bytes("ef"));
  EXPECT_EQ(set->samples[2].source, path + "@0");
  EXPECT_EQ(set->samples[3].context, Bytes("ghij"));
  EXPECT_EQ(set->samples[3].probe, Bytes("kl"));
  EXPECT_EQ(set->samples[3].source, path + "@6");
  for (int k = 0; k < 4; ++k) EXPECT_EQ(set->samples[k].index, k);
  EXPECT_EQ(set->domain, "user");
}

// 26 bytes make 8 windows of 3; seed 0 starts its order with windows 7 and 4.
TEST_F(CalibrationDataTest, PlainTextUsesTheFirstNWindowsOfTheSpreadOrder) {
  auto set = CalibrationDataFromText("abcdefghijklmnopqrstuvwxyz", "mem", *tokenizer_,
                                     {.samples = 2, .context_len = 2, .probe_len = 1});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(2));
  EXPECT_EQ(set->samples[0].context, Bytes("vw"));
  EXPECT_EQ(set->samples[0].probe, Bytes("x"));
  EXPECT_EQ(set->samples[0].source, "mem@21");
  EXPECT_EQ(set->samples[1].context, Bytes("mn"));
  EXPECT_EQ(set->samples[1].probe, Bytes("o"));
  EXPECT_EQ(set->samples[1].source, "mem@12");
  EXPECT_THAT(set->description,
              HasSubstr("user data mem (text windows): spread seed 0 over 8 windows; 2 samples"));
}

// A longer request keeps the samples of a shorter one (nested order), and the seed changes them.
TEST_F(CalibrationDataTest, PlainTextSetsAreNestedAndSeeded) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + " of a book\n";
  const DataOptions small{.samples = 5, .context_len = 20, .probe_len = 4, .data_seed = 3};
  DataOptions large = small;
  large.samples = 13;
  auto a = CalibrationDataFromText(text, "b", *tokenizer_, small);
  auto b = CalibrationDataFromText(text, "b", *tokenizer_, large);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_THAT(b->samples, SizeIs(13));
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(b->samples[k].source, a->samples[k].source) << k;
    EXPECT_EQ(b->samples[k].context, a->samples[k].context) << k;
    EXPECT_EQ(b->samples[k].probe, a->samples[k].probe) << k;
  }
  EXPECT_THAT(a->description, HasSubstr("spread seed 3 over"));
  DataOptions other_seed = small;
  other_seed.data_seed = 4;
  auto c = CalibrationDataFromText(text, "b", *tokenizer_, other_seed);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->fingerprint, a->fingerprint);
  EXPECT_NE(c->samples[0].source, a->samples[0].source);
}

TEST_F(CalibrationDataTest, JsonlKeepsLineOrderWhateverTheDataSeed) {
  const std::string text = "{\"text\": \"abcdefghij\"}\n{\"text\": \"0123456\"}\n";
  auto a = CalibrationDataFromJsonl(text, "j", *tokenizer_,
                                    {.samples = 2, .context_len = 4, .probe_len = 2});
  auto b = CalibrationDataFromJsonl(
      text, "j", *tokenizer_, {.samples = 2, .context_len = 4, .probe_len = 2, .data_seed = 9});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->samples[0].source, "j:1");
  EXPECT_EQ(a->samples[1].source, "j:2");
  EXPECT_EQ(a->fingerprint, b->fingerprint);
  EXPECT_EQ(a->description, b->description);
  EXPECT_EQ(a->domain, "user");
  EXPECT_THAT(a->description, ::testing::StartsWith("user data j (jsonl): 2 samples"));
}

TEST_F(CalibrationDataTest, PlainTextDropsAByteOrderMarkButKeepsOtherBytes) {
  const std::string path = Write("bom.txt",
                                 "\xEF\xBB\xBF"
                                 "ab\r\ncd");
  auto set = Load(path, 1, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->samples[0].context, Bytes("ab\r\n"));
  EXPECT_EQ(set->samples[0].probe, Bytes("cd"));
}

TEST_F(CalibrationDataTest, ForcedFormatOverridesTheExtension) {
  const std::string path = Write("data.txt", "{\"text\": \"abcdef\"}\n");
  auto set = LoadCalibrationData(
      path, *tokenizer_,
      {.samples = 1, .context_len = 2, .probe_len = 1, .format = DataFormat::kJsonl});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->samples[0].context, Bytes("ab"));
  // By extension: plain text, so the JSON is just bytes; 19 bytes make 6 windows of 3 and seed 0
  // takes window 5 first.
  auto as_text = Load(path, 1, 2, 1);
  ASSERT_TRUE(as_text.ok()) << as_text.status();
  EXPECT_EQ(as_text->samples[0].context, Bytes("f\""));
  EXPECT_EQ(as_text->samples[0].probe, Bytes("}"));
}

TEST_F(CalibrationDataTest, ShortLinesAreSkippedAndReportedWithLineNumbers) {
  const std::string path = Write("d.jsonl",
                                 "{\"text\": \"abcdefgh\"}\n"                          // 1 ok
                                 "{\"text\": \"abc\"}\n"                               // 2 short
                                 "\n"                                                  // 3 blank
                                 "{\"context\": \"ab\", \"continuation\": \"xyz\"}\n"  // 4
                                 "{\"context\": \"abcd\", \"continuation\": \"x\"}\n"  // 5
                                 "  \n"                                                // 6 blank
                                 "{\"text\": \"ABCDEFGH\"}\n");                        // 7 ok
  auto set = Load(path, 2, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(2));
  EXPECT_EQ(set->samples[1].source, path + ":7");
  EXPECT_EQ(set->samples[1].index, 1);
  ASSERT_THAT(set->skipped, SizeIs(3));
  EXPECT_EQ(set->skipped[0].source, path + ":2");
  EXPECT_THAT(set->skipped[0].reason, HasSubstr("text has 3 tokens"));
  EXPECT_THAT(set->skipped[0].reason, HasSubstr("4 + 2 = 6"));
  EXPECT_EQ(set->skipped[1].source, path + ":4");
  EXPECT_THAT(set->skipped[1].reason, HasSubstr("context has 2 tokens"));
  EXPECT_EQ(set->skipped[2].source, path + ":5");
  EXPECT_THAT(set->skipped[2].reason, HasSubstr("continuation has 1 tokens"));
  EXPECT_THAT(set->description, HasSubstr("3 lines skipped"));
}

TEST_F(CalibrationDataTest, StrictTurnsAShortLineIntoAnError) {
  const std::string path = Write("d.jsonl", "{\"text\": \"abcdefgh\"}\n{\"text\": \"abc\"}\n");
  auto set = Load(path, 2, 4, 2, /*strict=*/true);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr(path + ":2"));
  EXPECT_THAT(set.status().message(), HasSubstr("text has 3 tokens"));
}

TEST_F(CalibrationDataTest, TooFewJsonlSamplesIsAnErrorStatingTheNumbers) {
  const std::string path =
      Write("d.jsonl", "{\"text\": \"abcdefgh\"}\n{\"text\": \"ab\"}\n{\"text\": \"abcdefgh\"}\n");
  auto set = Load(path, 3, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(set.status().message());
  EXPECT_THAT(message, HasSubstr("2 usable samples"));
  EXPECT_THAT(message, HasSubstr("3 requested"));
  EXPECT_THAT(message, HasSubstr("in 3 JSON lines"));
  EXPECT_THAT(message, HasSubstr(path + ":2 (text has 2 tokens"));
}

TEST_F(CalibrationDataTest, TooFewTextWindowsIsAnErrorStatingTheNumbers) {
  const std::string path = Write("short.txt", "abcdefghijklmnopq");  // 17 tokens
  auto set = Load(path, 3, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(set.status().message());
  EXPECT_THAT(message, HasSubstr("17 tokens make 2 windows"));
  EXPECT_THAT(message, HasSubstr("3 requested (needs 18 tokens)"));
  EXPECT_THAT(message, HasSubstr(path));
}

TEST_F(CalibrationDataTest, BadJsonErrorNamesFileAndLine) {
  const std::string path =
      Write("d.jsonl", "{\"text\": \"abcdefgh\"}\n\n{\"text\": \"abc\" \"oops\"}\n");
  auto set = Load(path, 2, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr(path + ":3: invalid JSON at byte"));
}

TEST_F(CalibrationDataTest, MalformedLinesAreErrorsNamingTheField) {
  struct Case {
    std::string line;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "expected a JSON object, got array"},
      {"\"abc\"", "expected a JSON object, got string"},
      {"{\"txt\": \"abcdefgh\"}", "missing field: expected \"text\" or \"context\""},
      {"{\"context\": \"abcdefgh\"}", "missing field \"continuation\""},
      {"{\"continuation\": \"abcdefgh\"}", "missing field \"context\""},
      {"{\"text\": 42}", "field \"text\" must be a string, got number"},
      {"{\"text\": null}", "field \"text\" must be a string, got null"},
      {"{\"context\": \"abcdefgh\", \"continuation\": [\"x\"]}",
       "field \"continuation\" must be a string, got array"},
      {"{\"text\": \"abcdefgh\", \"context\": \"abcdefgh\"}", "has both \"text\" and \"context\""},
      {"{\"text\": \"ab\xFF\"}", "invalid JSON"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("d.jsonl", "{\"text\": \"abcdefgh\"}\n" + c.line + "\n");
    auto set = Load(path, 2, 4, 2);
    ASSERT_FALSE(set.ok()) << c.line;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(set.status().message(), HasSubstr(path + ":2: ")) << c.line;
    EXPECT_THAT(set.status().message(), HasSubstr(c.expected)) << c.line;
  }
}

TEST_F(CalibrationDataTest, LinesAfterTheLastNeededSampleAreNotRead) {
  const std::string path = Write("d.jsonl", "{\"text\": \"abcdefgh\"}\nnot json at all\n");
  auto set = Load(path, 1, 4, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->samples, SizeIs(1));
}

TEST_F(CalibrationDataTest, JsonDocumentIsReadAsJsonlAndFailsLoudly) {
  const std::string path = Write("d.json", "[\n  {\"text\": \"abcdefgh\"}\n]\n");
  auto set = Load(path, 1, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.status().message(), HasSubstr(path + ":1: invalid JSON"));
}

TEST_F(CalibrationDataTest, DeeplyNestedJsonIsAnErrorNotACrash) {
  const std::string path =
      Write("d.jsonl", std::string(200000, '[') + std::string(200000, ']') + "\n");
  auto set = Load(path, 1, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.status().message(), HasSubstr(path + ":1: expected a JSON object"));
}

TEST_F(CalibrationDataTest, OverlongJsonlLineIsAnErrorNamingTheLine) {
  std::string data = "{\"text\": \"abcdefgh\"}\n{\"text\": \"";
  data.append(size_t{65} << 20, 'a');
  data += "\"}\n";
  const std::string path = Write("d.jsonl", data);
  auto set = Load(path, 2, 4, 2);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr(path + ":2: line longer than"));
}

TEST_F(CalibrationDataTest, EmptyDataIsAClearError) {
  for (const auto& [name, bytes] :
       std::vector<std::pair<std::string, std::string>>{{"empty.jsonl", ""},
                                                        {"blank.jsonl", "\n  \n\r\n"},
                                                        {"empty.txt", ""},
                                                        {"blank.txt", " \n\n\t"}}) {
    const std::string path = Write(name, bytes);
    auto set = Load(path, 1, 4, 2);
    ASSERT_FALSE(set.ok()) << name;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(set.status().message(), HasSubstr(path)) << name;
    EXPECT_THAT(set.status().message(),
                ::testing::AnyOf(HasSubstr("empty"), HasSubstr("no JSON lines")))
        << name;
  }
}

TEST_F(CalibrationDataTest, MissingFileIsNotFoundAndADirectoryIsRefused) {
  auto missing = Load((dir_ / "nope.jsonl").string(), 1, 4, 2);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.jsonl"));
  auto missing_text = Load((dir_ / "nope.txt").string(), 1, 4, 2);
  EXPECT_EQ(missing_text.status().code(), absl::StatusCode::kNotFound);
  auto directory = Load(dir_.string(), 1, 4, 2);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);  // docs/ERRORS.md
  EXPECT_THAT(directory.status().message(), HasSubstr("not a regular file"));
  EXPECT_THAT(directory.status().message(), HasSubstr("calibration data "));
}

// The file path reads the bytes and hands them to the in-memory parser: for the same bytes both
// give the same samples, skips, fingerprint and description, or the same error.
TEST_F(CalibrationDataTest, InMemoryJsonlEqualsTheFileWithTheSameBytes) {
  const std::vector<std::string> inputs = {
      "{\"text\": \"abcdefghij\"}\n{\"text\": \"0123456\"}\n",
      "\xEF\xBB\xBF{\"context\": \"abcdef\", \"continuation\": \"XYZ\"}\r\n\n  \n{\"text\": "
      "\"mnopqrs\"}",
      "{\"text\": \"abc\"}\n{\"text\": \"abcdefgh\"}\n{\"context\": \"ab\", \"continuation\": "
      "\"x\"}\n"
      "{\"text\": \"zyxwvuts\"}\nnot json, never read\n",
      "{\"text\": \"abcdefgh\"}\n{\"text\": 7}\n",
      "{\"text\": \"abcdefgh\"}\n[1, 2]\n",
      "\n \r\n\n",
      "",
      "{\"text\": \"ab\"}\n",
  };
  int case_number = 0;
  for (const std::string& bytes : inputs) {
    SCOPED_TRACE(::testing::Message() << "case " << case_number);
    const std::string path = Write("case" + std::to_string(case_number++) + ".jsonl", bytes);
    for (bool strict : {false, true}) {
      const DataOptions options{.samples = 2, .context_len = 3, .probe_len = 2, .strict = strict};
      StatusOr<CalibrationSet> from_file = LoadCalibrationData(path, *tokenizer_, options);
      StatusOr<CalibrationSet> in_memory =
          CalibrationDataFromJsonl(bytes, path, *tokenizer_, options);
      ASSERT_EQ(from_file.ok(), in_memory.ok())
          << from_file.status() << " / " << in_memory.status();
      if (!from_file.ok()) {
        EXPECT_EQ(from_file.status().code(), in_memory.status().code());
        // The file path prefixes file-level messages with "calibration data "; parse errors are
        // the in-memory function's own.
        EXPECT_THAT(std::string(from_file.status().message()),
                    HasSubstr(std::string(in_memory.status().message())));
        continue;
      }
      ASSERT_THAT(in_memory->samples, SizeIs(from_file->samples.size()));
      for (size_t i = 0; i < from_file->samples.size(); ++i) {
        EXPECT_EQ(in_memory->samples[i].index, from_file->samples[i].index);
        EXPECT_EQ(in_memory->samples[i].context, from_file->samples[i].context);
        EXPECT_EQ(in_memory->samples[i].probe, from_file->samples[i].probe);
        EXPECT_EQ(in_memory->samples[i].source, from_file->samples[i].source);
      }
      ASSERT_THAT(in_memory->skipped, SizeIs(from_file->skipped.size()));
      for (size_t i = 0; i < from_file->skipped.size(); ++i) {
        EXPECT_EQ(in_memory->skipped[i].source, from_file->skipped[i].source);
        EXPECT_EQ(in_memory->skipped[i].reason, from_file->skipped[i].reason);
      }
      EXPECT_EQ(in_memory->fingerprint, from_file->fingerprint);
      EXPECT_EQ(in_memory->description, from_file->description);
    }
  }
}

TEST_F(CalibrationDataTest, InMemoryJsonlNamesTheSourceInSamplesAndErrors) {
  const DataOptions options{.samples = 1, .context_len = 3, .probe_len = 2};
  auto set = CalibrationDataFromJsonl("\n{\"text\": \"abcdefg\"}\n", "job 7", *tokenizer_, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(1));
  EXPECT_EQ(set->samples[0].source, "job 7:2");
  EXPECT_EQ(set->samples[0].context, Bytes("abc"));
  EXPECT_THAT(set->description, HasSubstr("job 7 (jsonl)"));
  auto bad = CalibrationDataFromJsonl("{\"text\": 1}", "job 7", *tokenizer_, options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("job 7:1: field \"text\" must be a string"));
  auto bad_options = CalibrationDataFromJsonl("{\"text\": \"abcdefg\"}", "job 7", *tokenizer_,
                                              {.samples = 1, .context_len = 2, .probe_len = 2});
  EXPECT_EQ(bad_options.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CalibrationDataTest, ContextAndProbeLengthsAreValidated) {
  const std::string path = Write("book.txt", std::string(1000, 'x'));
  for (const auto& [c, w] :
       std::vector<std::pair<int, int>>{{4, 4}, {4, 5}, {0, 1}, {4, 0}, {-1, 2}, {8, -3}}) {
    auto set = Load(path, 1, c, w);
    ASSERT_FALSE(set.ok()) << c << "," << w;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument) << c << "," << w;
  }
  EXPECT_THAT(Load(path, 1, 4, 4).status().message(),
              HasSubstr("params.probe_len: must be < params.context_len (4), got 4"));
  EXPECT_EQ(Load(path, 0, 4, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Load(path, 1, 4, 3).ok());
  EXPECT_EQ(DefaultCalibrationData(*tokenizer_, {.context_len = 8, .probe_len = 8}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CalibrationDataTest, SameInputsGiveTheSameSamplesAndFingerprint) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + " of a book\n";
  const std::string path = Write("book.txt", text);
  auto a = Load(path, 5, 20, 4);
  auto b = Load(path, 5, 20, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_THAT(b->samples, SizeIs(5));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(a->samples[i].context, b->samples[i].context);
    EXPECT_EQ(a->samples[i].probe, b->samples[i].probe);
    EXPECT_EQ(a->samples[i].source, b->samples[i].source);
  }
  EXPECT_EQ(a->fingerprint, b->fingerprint);
  EXPECT_EQ(a->description, b->description);
  EXPECT_THAT(a->description, HasSubstr("5 samples x (context 20 + probe 4) tokens"));
  auto other_split = Load(path, 5, 21, 3);  // same tokens per window, split differently
  ASSERT_TRUE(other_split.ok());
  EXPECT_NE(other_split->fingerprint, a->fingerprint);
  std::string edit = text;  // one byte changed in every line, so in every window
  for (size_t at = edit.find(" of a book"); at != std::string::npos; at = edit.find(" of a book")) {
    edit[at + 6] = 'B';
  }
  const std::string edited = Write("edited.txt", edit);
  auto c = Load(edited, 5, 20, 4);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->fingerprint, a->fingerprint);
}

TEST(SpreadWindowOrderTest, IsPinnedIntegerArithmetic) {
  // The same on every machine: these values are part of the data format (docs/DATA.md).
  EXPECT_THAT(SpreadWindowOrder(1000, 8, 0), ElementsAre(883, 501, 119, 737, 355, 973, 591, 209));
  EXPECT_THAT(SpreadWindowOrder(1000, 8, 42), ElementsAre(741, 359, 977, 595, 213, 831, 449, 67));
  EXPECT_THAT(SpreadWindowOrder(5, 5, 0), ElementsAre(4, 2, 0, 3, 1));  // collisions resolved
  EXPECT_TRUE(SpreadWindowOrder(0, 0, 0).empty());
}

TEST(SpreadWindowOrderTest, IsNestedDistinctAndInRange) {
  for (int64_t m : {1, 2, 7, 138, 1000, 65537}) {
    for (uint64_t seed : {0, 1, 77}) {
      const std::vector<int64_t> full = SpreadWindowOrder(m, std::min<int64_t>(m, 400), seed);
      std::set<int64_t> seen(full.begin(), full.end());
      EXPECT_EQ(seen.size(), full.size()) << "M=" << m;
      EXPECT_GE(*seen.begin(), 0);
      EXPECT_LT(*seen.rbegin(), m);
      for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}, m / 2, m - 8}) {
        if (n < 1 || n + 8 > static_cast<int64_t>(full.size())) continue;
        const std::vector<int64_t> small = SpreadWindowOrder(m, n, seed);
        const std::vector<int64_t> more = SpreadWindowOrder(m, n + 8, seed);
        EXPECT_TRUE(std::equal(small.begin(), small.end(), more.begin())) << m << " " << n;
        EXPECT_TRUE(std::equal(small.begin(), small.end(), full.begin())) << m << " " << n;
      }
    }
  }
  // All windows: a permutation.
  std::vector<int64_t> all = SpreadWindowOrder(138, 138, 5);
  std::sort(all.begin(), all.end());
  for (int64_t w = 0; w < 138; ++w) EXPECT_EQ(all[w], w);
  // A huge text costs nothing more: memory and time follow the count.
  for (int64_t w : SpreadWindowOrder(int64_t{1} << 50, 16, 0)) EXPECT_LT(w, int64_t{1} << 50);
}

// The bound tested: cut the M windows into N strata {w : floor(w N / M) = j}; every stratum holds
// at most 3 of the N windows and no 3 consecutive strata (cyclically) are all empty. (For N
// independent uniform draws the fullest stratum grows like log N / log log N and runs of empty
// strata grow like log N.)
TEST(SpreadWindowOrderTest, EveryStratumOfMOverNWindowsGetsAboutOne) {
  for (int64_t m : {7, 50, 138, 1000, 10007}) {
    for (uint64_t seed : {0, 1, 2, 3, 12345}) {
      const std::vector<int64_t> full = SpreadWindowOrder(m, std::min<int64_t>(m, 300), seed);
      for (int64_t n = 1; n <= static_cast<int64_t>(full.size()); ++n) {
        std::vector<int> count(static_cast<size_t>(n), 0);
        for (int64_t k = 0; k < n; ++k) ++count[static_cast<size_t>(full[k] * n / m)];
        EXPECT_LE(*std::max_element(count.begin(), count.end()), 3)
            << "M=" << m << " N=" << n << " seed " << seed;
        if (n < 3) continue;
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_TRUE(count[j] + count[(j + 1) % n] + count[(j + 2) % n] > 0)
              << "M=" << m << " N=" << n << " seed " << seed << " strata " << j << "..";
        }
      }
    }
  }
}

// A seed picks where the sequence starts, so two seeds give the same windows only when they start
// in the same window (for a pair of seeds, about 1 chance in M).
TEST(SpreadWindowOrderTest, DifferentSeedsGiveDifferentOrders) {
  for (int64_t m : {138, 1000}) {
    std::set<std::vector<int64_t>> orders;
    for (uint64_t seed = 0; seed < 20; ++seed) orders.insert(SpreadWindowOrder(m, 8, seed));
    EXPECT_EQ(orders.size(), 20u) << "M=" << m;
  }
  EXPECT_EQ(SpreadWindowOrder(1000, 8, 9), SpreadWindowOrder(1000, 8, 9));
}

// The built-in sets read with the byte vocabulary (one token per byte): a missing Debian package
// skips the test, naming it.
class BuiltinCalibrationDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = CreateTokenizer(testing::ByteLevelSpec({}));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }
  // Why the built-in sets cannot be read here, or empty.
  static std::string Missing() {
    for (const BuiltinCorpus& book : {kSherlockHolmes, kTomSawyer}) {
      if (!std::filesystem::exists(std::string(book.path))) {
        return std::string(book.path) + " is missing: install the Debian package " +
               std::string(book.package) + " (scripts/deps)";
      }
    }
    for (const BuiltinFileSet& files : {kPythonStdlib, kCmakeManuals}) {
      if (auto dir = FindBuiltinFileSetDir(files); !dir.ok())
        return std::string(dir.status().message());
    }
    return {};
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(BuiltinCalibrationDataTest, NamesAreKnownAndAnUnknownOneListsThem) {
  EXPECT_THAT(BuiltinCalibrationNames(),
              ElementsAre("mixed", "sherlock-holmes", "tom-sawyer", "code", "docs"));
  EXPECT_EQ(kDefaultCalibrationBuiltin, "mixed");
  for (std::string_view name : BuiltinCalibrationNames()) {
    EXPECT_TRUE(CheckBuiltinCalibrationName(name).ok()) << name;
  }
  auto unknown = BuiltinCalibrationData("war-and-peace", *tokenizer_, {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"war-and-peace\""));
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("known: mixed, sherlock-holmes, tom-sawyer, code, docs"));
}

TEST_F(BuiltinCalibrationDataTest, EachSetLoadsWithItsDomainAndIsDeterministic) {
  if (const std::string why = Missing(); !why.empty()) GTEST_SKIP() << why;
  const DataOptions options{.samples = 6, .context_len = 512, .probe_len = 32};
  struct Case {
    std::string_view name, domain, package;
  };
  for (const Case& c :
       {Case{"sherlock-holmes", "prose", kSherlockHolmes.package},
        Case{"tom-sawyer", "prose", kTomSawyer.package},
        Case{"code", "code", kPythonStdlib.package}, Case{"docs", "docs", kCmakeManuals.package}}) {
    SCOPED_TRACE(std::string(c.name));
    auto set = BuiltinCalibrationData(c.name, *tokenizer_, options);
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_THAT(set->samples, SizeIs(6));
    EXPECT_EQ(set->domain, c.domain);
    EXPECT_THAT(set->description, ::testing::StartsWith("built-in " + std::string(c.name) + " (" +
                                                        std::string(c.domain) + ": "));
    EXPECT_THAT(set->description, HasSubstr("Debian package " + std::string(c.package)));
    EXPECT_THAT(set->description, HasSubstr("spread seed 0 over "));
    EXPECT_THAT(set->description, HasSubstr("6 samples x (context 512 + probe 32) tokens"));
    for (const CalibrationSample& sample : set->samples) {
      EXPECT_THAT(sample.context, SizeIs(512));
      EXPECT_THAT(sample.probe, SizeIs(32));
      EXPECT_THAT(sample.source, ::testing::MatchesRegex("/.+@[0-9]+"));
    }
    auto again = BuiltinCalibrationData(c.name, *tokenizer_, options);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->fingerprint, set->fingerprint);
    EXPECT_EQ(again->description, set->description);
  }
}

// Mixed sample k is sample k / 3 of sherlock-holmes, code, docs for k mod 3 = 0, 1, 2; the default
// set is mixed, and tom-sawyer (the evaluation text) is not in it.
TEST_F(BuiltinCalibrationDataTest, MixedTakesProseCodeAndDocsInTurn) {
  if (const std::string why = Missing(); !why.empty()) GTEST_SKIP() << why;
  const DataOptions options{.samples = 8, .context_len = 256, .probe_len = 16, .data_seed = 11};
  auto mixed = BuiltinCalibrationData("mixed", *tokenizer_, options);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_THAT(mixed->samples, SizeIs(8));
  EXPECT_EQ(mixed->domain, "mixed");
  std::vector<CalibrationSet> singles;
  for (std::string_view name : {"sherlock-holmes", "code", "docs"}) {
    auto set = BuiltinCalibrationData(name, *tokenizer_, options);
    ASSERT_TRUE(set.ok()) << set.status();
    singles.push_back(*std::move(set));
  }
  for (int k = 0; k < 8; ++k) {
    const CalibrationSample& want = singles[k % 3].samples[k / 3];
    EXPECT_EQ(mixed->samples[k].index, k);
    EXPECT_EQ(mixed->samples[k].source, want.source) << k;
    EXPECT_EQ(mixed->samples[k].context, want.context) << k;
    EXPECT_EQ(mixed->samples[k].probe, want.probe) << k;
  }
  EXPECT_THAT(mixed->samples[0].source, ::testing::StartsWith(std::string(kSherlockHolmes.path)));
  EXPECT_THAT(mixed->description, ::testing::StartsWith("built-in mixed (prose: "));
  EXPECT_THAT(mixed->description, HasSubstr("; code: Python standard library"));
  EXPECT_THAT(mixed->description, HasSubstr("; docs: CMake reference manuals"));
  EXPECT_THAT(mixed->description, HasSubstr("prose, code, docs in turn, spread seed 11 over "));
  EXPECT_EQ(mixed->description.find("Tom Sawyer"), std::string::npos);
  // Nested: four more samples keep the first eight.
  DataOptions more = options;
  more.samples = 12;
  auto larger = BuiltinCalibrationData("mixed", *tokenizer_, more);
  ASSERT_TRUE(larger.ok());
  for (int k = 0; k < 8; ++k) EXPECT_EQ(larger->samples[k].source, mixed->samples[k].source);
  auto by_default = DefaultCalibrationData(*tokenizer_, options);
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->fingerprint, mixed->fingerprint);
  EXPECT_EQ(by_default->description, mixed->description);
}

TEST_F(BuiltinCalibrationDataTest, TooManySamplesNamesTheCorpusThatRunsShort) {
  if (const std::string why = Missing(); !why.empty()) GTEST_SKIP() << why;
  auto set = BuiltinCalibrationData("docs", *tokenizer_,
                                    {.samples = 2000, .context_len = 1024, .probe_len = 32});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("built-in docs ("));
  EXPECT_THAT(set.status().message(), HasSubstr("2000 requested"));
}

}  // namespace
}  // namespace ripplekv::worker
