// Evaluation text from a user's file: plain text and JSONL (documents joined by paragraph
// breaks), malformed lines named by file:line, names that are neither a book nor a file, and
// text too short for the examples asked for (the file, its tokens and the tokens needed named).

#include "eval/corpus_file.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eval/fidelity_task.h"
#include "eval/haystack.h"
#include "eval/synthetic_tasks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CorpusFileTest, JsonlDocumentsAreJoinedWithParagraphBreaks) {
  const std::string bytes =
      "\xEF\xBB\xBF{\"id\": 1, \"text\": \"  First doc.\\r\\nSecond line.\\n\"}\r\n"
      "\n"
      "   \n"
      "{\"text\": \"\\n\\n\", \"meta\": {\"x\": [1, 2]}}\n"  // blank document: skipped
      "{\"source\": \"web\", \"text\": \"Second doc.\"}\n"
      "{\"text\": \"Third doc.\"}";  // no final newline
  auto text = CorpusTextFromJsonl(bytes, "t.jsonl");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "First doc.\nSecond line.\n\nSecond doc.\n\nThird doc.");
}

TEST(CorpusFileTest, MalformedJsonlLinesNameTheFileAndLine) {
  for (const auto& [bytes, where, what] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"{\"text\": \"a\"}\n{\"text\": \"b\"\n", "d.jsonl:2", "invalid JSON"},
           {"\n\n[\"text\"]\n", "d.jsonl:3", "expected a JSON object"},
           {"{\"text\": \"a\"}\n{\"body\": \"b\"}\n", "d.jsonl:2", "\"text\" is missing"},
           {"{\"text\": [\"a\"]}\n", "d.jsonl:1", "must be a string, got array"},
           {"{\"text\": null}\n", "d.jsonl:1", "must be a string, got null"},
       }) {
    SCOPED_TRACE(bytes);
    auto text = CorpusTextFromJsonl(bytes, "d.jsonl");
    ASSERT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(text.status().message()), HasSubstr(where + ": "));
    EXPECT_THAT(std::string(text.status().message()), HasSubstr(what));
  }
  // Nothing to read.
  EXPECT_EQ(CorpusTextFromJsonl("\n \n", "e.jsonl").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CorpusTextFromJsonl("{\"text\": \" \"}\n", "e.jsonl").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CorpusFileTest, PlainTextKeepsItsBytesButTheBomCrlfAndOuterBlanks) {
  auto text = CorpusTextFromPlain("\xEF\xBB\xBF\n\nOne.\r\n\r\nTwo  \t\n\n", "p.txt");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "One.\n\nTwo");
  auto blank = CorpusTextFromPlain(" \r\n\t", "p.txt");
  EXPECT_EQ(blank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(blank.status().message()), HasSubstr("p.txt"));
}

TEST(CorpusFileTest, NamesAndBuiltins) {
  EXPECT_EQ(CorpusFileName("/data/traffic.jsonl"), "traffic.jsonl");
  EXPECT_EQ(CorpusFileName("notes.txt"), "notes.txt");
  EXPECT_EQ(CorpusFileName("./tom-sawyer"), "tom-sawyer");
  EXPECT_TRUE(IsBuiltinCorpusName("tom-sawyer"));
  EXPECT_TRUE(IsBuiltinCorpusName("sherlock-holmes"));
  EXPECT_FALSE(IsBuiltinCorpusName("./tom-sawyer"));
  EXPECT_FALSE(IsBuiltinCorpusName("tom-sawyer.txt"));
}

class CorpusFileLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    std::string templ = (fs::temp_directory_path() / "ripplekv_corpus_file_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::unique_ptr<worker::Tokenizer> tokenizer_;
  fs::path dir_;
};

TEST_F(CorpusFileLoadTest, PlainFileIsReadWholeAndNamedByItsBaseName) {
  const std::string text = testing::Prose(30);
  const std::string path = Write("notes.txt", text + "\n");
  auto corpus = LoadHaystackCorpus(path, *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->name(), "notes.txt");
  EXPECT_EQ(corpus->origin(), path);
  EXPECT_EQ(corpus->Text(0, corpus->size()), text);
  EXPECT_EQ(corpus->paragraph_starts().size(), 30u);
  auto examples = GenerateFidelity(*corpus, *tokenizer_,
                                   {.context_len = 300, .continuation_len = 10, .num_examples = 2});
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_THAT((*examples)[0].id, ::testing::StartsWith("fidelity/notes.txt/test@"));
  EXPECT_THAT((*examples)[0].source, ::testing::StartsWith("notes.txt@"));
}

TEST_F(CorpusFileLoadTest, JsonlFileGivesAParagraphPerDocument) {
  const std::string path =
      Write("traffic.JSONL", "{\"text\": \"Alpha one.\"}\n{\"text\": \"Beta two.\", \"n\": 2}\n");
  auto corpus = LoadHaystackCorpus(path, *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->name(), "traffic.JSONL");
  EXPECT_EQ(corpus->Text(0, corpus->size()), "Alpha one.\n\nBeta two.");
  EXPECT_THAT(corpus->paragraph_starts(), ElementsAre(0, 12));

  const std::string bad = Write("bad.ndjson", "{\"text\": \"ok\"}\n\n{\"text\": 7}\n");
  auto r = LoadHaystackCorpus(bad, *tokenizer_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(bad + ":3: field \"text\""));
}

TEST_F(CorpusFileLoadTest, ANameThatIsNeitherABookNorAFileListsTheBooks) {
  auto r = LoadHaystackCorpus("tom-sawer", *tokenizer_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tom-sawer"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"tom-sawyer\""));
  auto dir = LoadHaystackCorpus(dir_.string(), *tokenizer_);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CorpusFileLoadTest, TooShortTextNamesTheFileItsTokensAndWhatIsNeeded) {
  const std::string path = Write("short.txt", testing::Prose(4));
  auto corpus = LoadHaystackCorpus(path, *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const std::string size = std::to_string(corpus->size());

  auto fidelity = GenerateFidelity(*corpus, *tokenizer_,
                                   {.context_len = 500, .continuation_len = 20, .num_examples = 4});
  ASSERT_EQ(fidelity.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string f(fidelity.status().message());
  EXPECT_THAT(f, HasSubstr("corpus file " + path + " has " + size + " tokens"));
  EXPECT_THAT(f, HasSubstr("4 windows of 500 + 20 tokens do not fit"));
  EXPECT_THAT(f, HasSubstr("needs a corpus of at least 4160 tokens"));

  auto passkey = GenerateSynthetic(SyntheticTask::kPasskey, *corpus, *tokenizer_,
                                   {.prompt_len = 2000, .split = EvalSplit::kValidation});
  ASSERT_EQ(passkey.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string p(passkey.status().message());
  EXPECT_THAT(p, HasSubstr("corpus file " + path + " has " + size + " tokens"));
  EXPECT_THAT(p, HasSubstr("does not fit in its validation region"));
  EXPECT_THAT(p, HasSubstr("needs a corpus of at least"));
}

}  // namespace
}  // namespace ripplekv::eval
