// Byte-level BPE on hand-made vocabularies: merge order, pre-tokenization, byte mapping, decode.

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::ByteLevel;
using testing::ByteLevelSpec;
using ::testing::ElementsAre;
using testing::IdOf;

std::unique_ptr<Tokenizer> Build(TokenizerSpec spec) {
  auto tokenizer = CreateTokenizer(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = false};

TEST(BpeTokenizerTest, LowerRankMergesFirstWhereverItIs) {
  // "bc" has rank 0, "ab" rank 1: "abc" becomes a + bc, not ab + c.
  TokenizerSpec spec = ByteLevelSpec({{"b", "c"}, {"a", "b"}});
  const int32_t bc = IdOf(spec, "bc");
  auto tok = Build(spec);
  EXPECT_THAT(tok->Encode("abc", kPlain), ElementsAre('a', bc));

  TokenizerSpec reversed = ByteLevelSpec({{"a", "b"}, {"b", "c"}});
  const int32_t ab = IdOf(reversed, "ab");
  EXPECT_THAT(Build(reversed)->Encode("abc", kPlain), ElementsAre(ab, 'c'));
}

TEST(BpeTokenizerTest, EqualRanksMergeLeftmostFirst) {
  TokenizerSpec spec = ByteLevelSpec({{"a", "a"}});
  const int32_t aa = IdOf(spec, "aa");
  EXPECT_THAT(Build(spec)->Encode("aaa", kPlain), ElementsAre(aa, 'a'));
}

TEST(BpeTokenizerTest, MergesChainIntoOneToken) {
  TokenizerSpec spec = ByteLevelSpec({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}});
  const int32_t hello = IdOf(spec, "hello");
  auto tok = Build(spec);
  EXPECT_THAT(tok->Encode("hello", kPlain), ElementsAre(hello));
  EXPECT_THAT(tok->Encode("hellohello", kPlain), ElementsAre(hello, hello));
  EXPECT_EQ(tok->Decode(tok->Encode("hellohello", kPlain)), "hellohello");
}

TEST(BpeTokenizerTest, SpaceIsEncodedAsItsByteCharacter) {
  TokenizerSpec spec = ByteLevelSpec({{" ", "h"}});
  const int32_t space_h = IdOf(spec, ByteLevel(" h"));
  ASSERT_EQ(spec.tokens[space_h], "\xC4\xA0h");  // "Ġh"
  EXPECT_THAT(Build(spec)->Encode("a hi", kPlain), ElementsAre('a', space_h, 'i'));
}

TEST(BpeTokenizerTest, PreTokenizerStopsMergesAcrossWords) {
  // "a" + " " could merge, but the GPT-2 regex cuts "a b" into "a" and " b".
  TokenizerSpec spec = ByteLevelSpec({{"a", " "}});
  EXPECT_THAT(Build(spec)->Encode("a b", kPlain), ElementsAre('a', ' ', 'b'));
}

TEST(BpeTokenizerTest, SmollmSplitsDigitsOneByOneButGpt2DoesNot) {
  TokenizerSpec smollm = ByteLevelSpec({{"1", "2"}}, "smollm");
  EXPECT_THAT(Build(smollm)->Encode("x12", kPlain), ElementsAre('x', '1', '2'));
  TokenizerSpec gpt2 = ByteLevelSpec({{"1", "2"}}, "gpt-2");
  EXPECT_THAT(Build(gpt2)->Encode("x12", kPlain), ElementsAre('x', IdOf(gpt2, "12")));
}

TEST(BpeTokenizerTest, Llama3EmitsWholeWordTokensWithoutMerges) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.tokens.push_back("abc");  // a token no merge produces
  const int32_t abc = static_cast<int32_t>(spec.tokens.size() - 1);
  TokenizerSpec llama3 = spec;
  llama3.pre = "llama3";
  EXPECT_THAT(Build(llama3)->Encode("abc", kPlain), ElementsAre(abc));
  EXPECT_THAT(Build(spec)->Encode("abc", kPlain), ElementsAre('a', 'b', 'c'));
}

TEST(BpeTokenizerTest, MultiByteCharactersUseByteTokensUntilMerged) {
  TokenizerSpec plain = ByteLevelSpec({});
  EXPECT_THAT(Build(plain)->Encode("\xC3\xA9", kPlain), ElementsAre(0xC3, 0xA9));  // é
  TokenizerSpec merged = ByteLevelSpec({{"\xC3", "\xA9"}});
  EXPECT_THAT(Build(merged)->Encode("\xC3\xA9", kPlain),
              ElementsAre(IdOf(merged, ByteLevel("\xC3\xA9"))));
}

TEST(BpeTokenizerTest, InvalidUtf8IsReadAsReplacementCharacter) {
  auto tok = Build(ByteLevelSpec({}));
  // A stray 0xFF and a truncated 2-byte sequence each become U+FFFD (EF BF BD), as llama.cpp.
  EXPECT_THAT(tok->Encode("\xFF", kPlain), ElementsAre(0xEF, 0xBF, 0xBD));
  EXPECT_THAT(tok->Encode("a\xC3", kPlain), ElementsAre('a', 0xEF, 0xBF, 0xBD));
}

TEST(BpeTokenizerTest, DecodeIsTheInverseOfEncode) {
  auto tok = Build(
      ByteLevelSpec({{" ", "w"}, {" w", "o"}, {"\xE4", "\xB8"}, {"\xE4\xB8", "\xAD"}}, "smollm"));
  for (const std::string s : {"", " ", "Hello world", "  two  spaces\n\nnew\tlines\r\n",
                              "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87", "emoji \xF0\x9F\x98\x80!",
                              "1234 + 5.6 = x", "it's John's  'quote'", "\xE3\x80\x80wide"}) {
    EXPECT_EQ(tok->Decode(tok->Encode(s, kPlain)), s) << s;
  }
}

TEST(BpeTokenizerTest, DecodePassesIncompleteCharactersThroughAsBytes) {
  auto tok = Build(ByteLevelSpec({}));
  const std::vector<int32_t> ids = tok->Encode("\xC3\xA9", kPlain);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{ids[0]}), "\xC3");
  EXPECT_EQ(tok->TokenToPiece(ids[1]), "\xA9");
}

TEST(BpeTokenizerTest, TokenToPieceOutOfRangeIsEmpty) {
  auto tok = Build(ByteLevelSpec({}));
  EXPECT_EQ(tok->TokenToPiece(-1), "");
  EXPECT_EQ(tok->TokenToPiece(tok->vocab_size()), "");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{'h', -5, 1 << 30, 'i'}), "hi");
}

TEST(BpeTokenizerTest, RepeatedWordsGiveTheSameIdsAsSingleWords) {
  // The per-call cache must not change results.
  TokenizerSpec spec = ByteLevelSpec({{"a", "b"}, {" ", "ab"}, {"ab", "c"}});
  auto tok = Build(spec);
  std::vector<int32_t> expected;
  for (int i = 0; i < 5; ++i) {
    const std::vector<int32_t> one = tok->Encode(i == 0 ? "abc" : " abc", kPlain);
    expected.insert(expected.end(), one.begin(), one.end());
  }
  EXPECT_EQ(tok->Encode("abc abc abc abc abc", kPlain), expected);
}

TEST(BpeTokenizerTest, Encodes100KilobytesWellUnderASecond) {
  // Every pair of lower-case letters merges, then every letter pair with a following letter.
  std::vector<std::pair<std::string, std::string>> merges;
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) merges.push_back({std::string(1, a), std::string(1, b)});
  }
  for (char a = 'a'; a <= 'z'; ++a) merges.push_back({" ", std::string(1, a)});
  auto tok = Build(ByteLevelSpec(merges));
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < 100 * 1024) {
    const int len = 1 + rng() % 12;
    for (int i = 0; i < len; ++i) text.push_back(static_cast<char>('a' + rng() % 26));
    text.push_back(rng() % 10 == 0 ? '\n' : ' ');
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(text, kPlain);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok->Decode(ids), text);
}

}  // namespace
}  // namespace ripplekv::worker
