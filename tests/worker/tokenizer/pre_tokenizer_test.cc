// Pre-tokenizer regex splitting with llama.cpp's semantics.

#include "worker/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ripplekv::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Pieces(std::string_view pre_type, std::string_view text) {
  auto type = LookupPreTokenizer(pre_type);
  EXPECT_TRUE(type.ok()) << type.status();
  auto splitter = RegexSplitter::Create(type->regexes);
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  const PreTokenized pre = splitter->Split(text);
  std::vector<std::string> out;
  for (const auto& [b, e] : pre.pieces) out.push_back(pre.text.substr(b, e - b));
  return out;
}

TEST(PreTokenizerTest, Gpt2SplitsWordsContractionsAndSpaceRuns) {
  EXPECT_THAT(Pieces("gpt-2", "Hello world's  end!!\n"),
              ElementsAre("Hello", " world", "'s", " ", " end", "!!", "\n"));
  // \s+(?!\S): a run of spaces before a word leaves its last space to the word.
  EXPECT_THAT(Pieces("gpt-2", "a   b"), ElementsAre("a", "  ", " b"));
  // A lone whitespace before a non-space, which no alternative matches, is kept as a gap.
  EXPECT_THAT(Pieces("gpt-2", "a\tb"), ElementsAre("a", "\t", "b"));
}

TEST(PreTokenizerTest, SmollmCutsEveryDigitBeforeTheGpt2Regex) {
  EXPECT_THAT(Pieces("smollm", "abc 123x"), ElementsAre("abc", " ", "1", "2", "3", "x"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndKeepsNewlinesTogether) {
  EXPECT_THAT(Pieces("llama3", "12345 I'M ok\n\n  x"),
              ElementsAre("123", "45", " I", "'M", " ok", "\n\n", " ", " x"));
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsOneByOne) {
  EXPECT_THAT(Pieces("qwen2", "ab12"), ElementsAre("ab", "1", "2"));
}

TEST(PreTokenizerTest, UnicodeWhitespaceAndLettersFollowLlamaCppClasses) {
  // U+3000 (ideographic space) is White_Space; U+00E9 is a letter; U+0663 (Arabic three) a number.
  EXPECT_THAT(Pieces("gpt-2", "caf\xC3\xA9\xE3\x80\x80\xD9\xA3"),
              ElementsAre("caf\xC3\xA9", "\xE3\x80\x80", "\xD9\xA3"));
  // U+200B (zero width space) is not White_Space in llama.cpp: it goes with the punctuation class.
  EXPECT_THAT(Pieces("gpt-2", "a \xE2\x80\x8B"), ElementsAre("a", " \xE2\x80\x8B"));
}

TEST(PreTokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  auto splitter = RegexSplitter::Create(std::vector<std::string>{"\\p{L}+"});
  ASSERT_TRUE(splitter.ok());
  const PreTokenized pre = splitter->Split(
      "a\xFF"
      "b");
  EXPECT_EQ(pre.text,
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(pre.pieces.size(), 3u);
}

TEST(PreTokenizerTest, SurrogatesPassThroughAsLlamaCppKeepsThem) {
  // ED A0 80 decodes (leniently) to U+D800; llama.cpp re-encodes it unchanged.
  auto splitter = RegexSplitter::Create(std::vector<std::string>{"\\p{L}+"});
  ASSERT_TRUE(splitter.ok());
  const PreTokenized pre = splitter->Split("x\xED\xA0\x80y");
  EXPECT_EQ(pre.text, "x\xED\xA0\x80y");
  ASSERT_EQ(pre.pieces.size(), 3u);
  EXPECT_EQ(pre.pieces[1], std::make_pair(size_t{1}, size_t{4}));
}

TEST(PreTokenizerTest, EmptyMatchesSplitWithoutEmptyPieces) {
  auto splitter = RegexSplitter::Create(std::vector<std::string>{"(?=b)"});
  ASSERT_TRUE(splitter.ok());
  const PreTokenized pre = splitter->Split("abab");
  std::vector<std::string> pieces;
  for (const auto& [b, e] : pre.pieces) pieces.push_back(pre.text.substr(b, e - b));
  EXPECT_THAT(pieces, ElementsAre("a", "ba", "b"));
}

TEST(PreTokenizerTest, UnknownTypeIsAnErrorNamingIt) {
  auto type = LookupPreTokenizer("no-such-tokenizer");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(type.status().message()), HasSubstr("no-such-tokenizer"));
}

TEST(PreTokenizerTest, BadRegexIsAnErrorNotACrash) {
  auto splitter = RegexSplitter::Create(std::vector<std::string>{"(unclosed"});
  ASSERT_FALSE(splitter.ok());
  EXPECT_THAT(std::string(splitter.status().message()), HasSubstr("(unclosed"));
  EXPECT_FALSE(ToPcre2Pattern("[^\\S]").ok());
  EXPECT_THAT(*ToPcre2Pattern("[]\\s]"), HasSubstr("\\x{3000}"));
}

}  // namespace
}  // namespace ripplekv::worker
