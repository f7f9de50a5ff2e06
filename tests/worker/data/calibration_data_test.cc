// Calibration data: JSONL and plain-text samples (from files and from memory), skip reports,
// errors, the built-in set.
// Most tests use a byte-level vocabulary without merges, where the token id of each byte is the
// byte itself, so expected windows can be written as strings. The SmolLM2 test (needs
// RIPPLEKV_SMOLLM2_GGUF, skips without it) checks the built-in set with the real tokenizer.

#include "worker/data/calibration_data.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/model/gguf_reader.h"
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

TEST_F(CalibrationDataTest, PlainTextCutsConsecutiveNonOverlappingWindows) {
  const std::string path = Write("book.txt", "abcdefghijklmnopqrstuvwxyz");
  auto set = Load(path, 4, 4, 2);  // windows of 6: 26 bytes hold 4, 2 bytes left over
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(4));
  EXPECT_EQ(set->samples[0].context, Bytes("abcd"));
  EXPECT_EQ(set->samples[0].probe, Bytes("ef"));
  EXPECT_EQ(set->samples[1].context, Bytes("ghij"));
  EXPECT_EQ(set->samples[1].probe, Bytes("kl"));
  EXPECT_EQ(set->samples[3].context, Bytes("stuv"));
  EXPECT_EQ(set->samples[3].probe, Bytes("wx"));
  EXPECT_EQ(set->samples[0].source, path + "@0");
  EXPECT_EQ(set->samples[1].source, path + "@6");
  EXPECT_EQ(set->samples[3].source, path + "@18");
  EXPECT_EQ(set->samples[3].index, 3);
}

TEST_F(CalibrationDataTest, PlainTextUsesOnlyTheFirstNWindows) {
  auto set = CalibrationDataFromText("abcdefghijklmnopqrstuvwxyz", "mem", *tokenizer_,
                                     {.samples = 2, .context_len = 2, .probe_len = 1});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(2));
  EXPECT_EQ(set->samples[1].context, Bytes("de"));
  EXPECT_EQ(set->samples[1].probe, Bytes("f"));
  EXPECT_EQ(set->samples[1].source, "mem@3");
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
  auto as_text = Load(path, 1, 2, 1);  // by extension: plain text, so the JSON is just bytes
  ASSERT_TRUE(as_text.ok()) << as_text.status();
  EXPECT_EQ(as_text->samples[0].context, Bytes("{\""));
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
  EXPECT_THAT(Load(path, 1, 4, 4).status().message(), HasSubstr("probe length (4)"));
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
  const std::string edited = Write("edited.txt", "L" + text.substr(1));
  auto c = Load(edited, 5, 20, 4);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->fingerprint, a->fingerprint);
}

// Label model: the real tokenizer over the built-in text.
TEST(BuiltinCalibrationDataModelTest, SmolLm2GivesSixteenSamplesOf1024Plus32) {
  const char* model_path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (model_path == nullptr || *model_path == '\0') {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set; point it at "
                    "SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model)";
  }
  if (!std::filesystem::exists(std::string(kSherlockHolmes.path))) {
    GTEST_SKIP() << kSherlockHolmes.path << " is missing: install " << kSherlockHolmes.package;
  }
  auto gguf = GgufFile::Open(model_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tokenizer = TokenizerFromGguf(**gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const DataOptions options{.samples = 16, .context_len = 1024, .probe_len = 32};
  auto set = DefaultCalibrationData(**tokenizer, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_THAT(set->samples, SizeIs(16));
  for (const CalibrationSample& s : set->samples) {
    EXPECT_THAT(s.context, SizeIs(1024));
    EXPECT_THAT(s.probe, SizeIs(32));
  }
  EXPECT_EQ(set->samples[1].source, std::string(kSherlockHolmes.path) + "@1056");
  EXPECT_THAT((*tokenizer)->Decode(set->samples[0].context),
              ::testing::StartsWith("THE ADVENTURES OF SHERLOCK HOLMES"));
  EXPECT_THAT(set->description, HasSubstr("golang-github-pierrec-lz4-dev"));
  EXPECT_THAT(set->description, HasSubstr("16 samples x (context 1024 + probe 32) tokens"));
  // The whole book is much larger than the default request: room for more samples.
  auto many =
      DefaultCalibrationData(**tokenizer, {.samples = 100, .context_len = 1024, .probe_len = 32});
  EXPECT_TRUE(many.ok()) << many.status();
  auto again = DefaultCalibrationData(**tokenizer, options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->fingerprint, set->fingerprint);
}

}  // namespace
}  // namespace ripplekv::worker
