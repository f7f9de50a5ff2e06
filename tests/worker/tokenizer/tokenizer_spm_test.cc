// SentencePiece-style BPE ("llama" vocabularies) on a hand-made vocabulary.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::AddToken;
using ::testing::ElementsAre;
using testing::IdOf;

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = false};

// <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then `pieces` with scores.
TokenizerSpec SpmSpec(const std::vector<std::pair<std::string, float>>& pieces,
                      bool with_bytes = true) {
  TokenizerSpec spec;
  spec.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
    spec.token_types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, 0, TokenType::kByte);
    }
  }
  for (const auto& [text, score] : pieces) add(text, score, TokenType::kNormal);
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  return spec;
}

const char* const kSp = "\xE2\x96\x81";  // U+2581

std::string Sp(std::string_view s) {
  std::string out;
  for (char c : s) out += c == ' ' ? std::string(kSp) : std::string(1, c);
  return out;
}

std::unique_ptr<Tokenizer> Build(TokenizerSpec spec) {
  auto tokenizer = CreateTokenizer(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

TEST(SpmTokenizerTest, HigherScoreMergesFirst) {
  TokenizerSpec spec = SpmSpec({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -0.5}});
  spec.add_space_prefix = false;
  EXPECT_THAT(Build(spec)->Encode("abc", kPlain), ElementsAre(IdOf(spec, "a"), IdOf(spec, "bc")));

  TokenizerSpec swapped = SpmSpec({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -0.5}, {"bc", -1}});
  swapped.add_space_prefix = false;
  EXPECT_THAT(Build(swapped)->Encode("abc", kPlain),
              ElementsAre(IdOf(swapped, "ab"), IdOf(swapped, "c")));
}

TEST(SpmTokenizerTest, SpacesBecomeU2581AndAPrefixSpaceIsAdded) {
  TokenizerSpec spec = SpmSpec({{Sp(" "), -1},
                                {"h", -2},
                                {"i", -2},
                                {Sp(" h"), -1.5},
                                {Sp(" hi"), -0.5},
                                {"t", -2},
                                {"he", -3},
                                {"e", -2},
                                {"r", -2},
                                {Sp(" t"), -1.6},
                                {Sp(" th"), -1.2},
                                {"th", -3},
                                {Sp(" the"), -0.7},
                                {"er", -3},
                                {"re", -1.1},
                                {Sp(" there"), -0.2},
                                {"ere", -0.9}});
  auto tok = Build(spec);
  EXPECT_THAT(tok->Encode("hi there", kPlain),
              ElementsAre(IdOf(spec, Sp(" hi")), IdOf(spec, Sp(" there"))));
  // With add_special the vocabulary's BOS comes first.
  EXPECT_THAT(tok->Encode("hi", {}), ElementsAre(1, IdOf(spec, Sp(" hi"))));

  TokenizerSpec no_prefix = spec;
  no_prefix.add_space_prefix = false;
  EXPECT_THAT(Build(no_prefix)->Encode("hi", kPlain),
              ElementsAre(IdOf(spec, "h"), IdOf(spec, "i")));
}

TEST(SpmTokenizerTest, UnknownCharactersFallBackToByteTokens) {
  TokenizerSpec spec = SpmSpec({{Sp(" "), -1}, {"a", -1}});
  auto tok = Build(spec);
  // "é" = C3 A9 is not a token: <0xC3> <0xA9> (byte token ids are 3 + byte).
  EXPECT_THAT(tok->Encode("a\xC3\xA9", kPlain),
              ElementsAre(IdOf(spec, Sp(" ")), IdOf(spec, "a"), 3 + 0xC3, 3 + 0xA9));
  EXPECT_EQ(tok->Decode(tok->Encode("a\xC3\xA9", kPlain)), "a\xC3\xA9");
}

TEST(SpmTokenizerTest, BytesWithoutByteTokensBecomeUnknown) {
  TokenizerSpec spec = SpmSpec({{Sp(" "), -1}, {"a", -1}}, /*with_bytes=*/false);
  EXPECT_THAT(Build(spec)->Encode("az", kPlain),
              ElementsAre(IdOf(spec, Sp(" ")), IdOf(spec, "a"), 0));
}

TEST(SpmTokenizerTest, SpecialTokensAreCutOutAndFollowedByASpacePrefix) {
  TokenizerSpec spec =
      SpmSpec({{Sp(" "), -1}, {"h", -2}, {"i", -2}, {Sp(" h"), -1.5}, {Sp(" hi"), -0.5}});
  auto tok = Build(spec);
  const EncodeOptions parse{.add_special = false, .parse_special = true};
  EXPECT_THAT(tok->Encode("hi</s>hi", parse),
              ElementsAre(IdOf(spec, Sp(" hi")), 2, IdOf(spec, Sp(" hi"))));
  // Without parse_special the control token's text is ordinary characters (here: bytes).
  const std::vector<int32_t> literal = tok->Encode("</s>", kPlain);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(tok->Decode(literal), "</s>");
}

TEST(SpmTokenizerTest, DecodeUndoesEscapingPrefixAndByteFallback) {
  TokenizerSpec spec =
      SpmSpec({{Sp(" "), -1}, {"h", -2}, {"i", -2}, {Sp(" h"), -1.5}, {Sp(" hi"), -0.5}});
  auto tok = Build(spec);
  for (const std::string s : {"hi", "hi hi", "  hi", "x\xE4\xB8\xAD!", ""}) {
    EXPECT_EQ(tok->Decode(tok->Encode(s, kPlain)), s) << s;
  }
  const EncodeOptions parse{.add_special = true, .parse_special = true};
  EXPECT_EQ(tok->Decode(tok->Encode("hi</s>hi", parse)), "<s>hi</s>hi");
  EXPECT_EQ(tok->Decode(tok->Encode("hi</s>hi", parse), {.skip_special = true}), "hihi");
  EXPECT_EQ(tok->TokenToPiece(IdOf(spec, Sp(" hi"))), " hi");
  EXPECT_EQ(tok->TokenToPiece(3 + 'A'), "A");
}

TEST(SpmTokenizerTest, EmptyTextGivesOnlyBos) {
  auto tok = Build(SpmSpec({{Sp(" "), -1}}));
  EXPECT_THAT(tok->Encode("", {}), ElementsAre(1));
  EXPECT_TRUE(tok->Encode("", kPlain).empty());
}

}  // namespace
}  // namespace ripplekv::worker
