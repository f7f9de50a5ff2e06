// Special tokens: partition of raw text, BOS/EOS, end-of-generation ids, rendering.

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::AddToken;
using testing::ByteLevelSpec;
using ::testing::ElementsAre;
using testing::IdOf;

struct ChatVocab {
  TokenizerSpec spec;
  int32_t endoftext, im_start, im_end, tool, ab, abc;
};

ChatVocab MakeChatVocab() {
  ChatVocab v;
  v.spec = ByteLevelSpec({{"a", "b"}}, "smollm");
  v.endoftext = AddToken(&v.spec, "<|endoftext|>", TokenType::kControl);
  v.im_start = AddToken(&v.spec, "<|im_start|>", TokenType::kControl);
  v.im_end = AddToken(&v.spec, "<|im_end|>", TokenType::kControl);
  v.tool = AddToken(&v.spec, "<tool>", TokenType::kUserDefined);
  v.abc = AddToken(&v.spec, "xyz", TokenType::kUserDefined);
  v.ab = AddToken(&v.spec, "xy", TokenType::kUserDefined);
  v.spec.bos_id = v.im_start;
  v.spec.eos_id = v.endoftext;
  return v;
}

std::unique_ptr<Tokenizer> Build(TokenizerSpec spec) {
  auto tokenizer = CreateTokenizer(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

constexpr EncodeOptions kPlain{.add_special = false, .parse_special = false};
constexpr EncodeOptions kParse{.add_special = false, .parse_special = true};

TEST(SpecialTokenTest, ControlTokensAreRecognisedOnlyWithParseSpecial) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_THAT(tok->Encode("<|im_start|>user", kParse), ElementsAre(v.im_start, 'u', 's', 'e', 'r'));
  const std::vector<int32_t> literal = tok->Encode("<|im_start|>user", kPlain);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), v.im_start), 0);
  EXPECT_EQ(tok->Decode(literal), "<|im_start|>user");
}

TEST(SpecialTokenTest, UserDefinedTokensAreAlwaysRecognised) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_THAT(tok->Encode("a<tool>b", kPlain), ElementsAre('a', v.tool, 'b'));
  EXPECT_THAT(tok->Encode("a<tool>b", kParse), ElementsAre('a', v.tool, 'b'));
}

TEST(SpecialTokenTest, LongerSpecialTokensWinOverTheirPrefixes) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_THAT(tok->Encode("xyzxy", kPlain), ElementsAre(v.abc, v.ab));
  EXPECT_THAT(tok->Encode("xyxyz", kPlain), ElementsAre(v.ab, v.abc));
}

TEST(SpecialTokenTest, TextAroundSpecialsIsEncodedPieceByPiece) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_THAT(tok->Encode("ab<|im_end|>ab<|im_end|>", kParse),
              ElementsAre(IdOf(v.spec, "ab"), v.im_end, IdOf(v.spec, "ab"), v.im_end));
}

TEST(SpecialTokenTest, AddSpecialAddsBosAndEosOnlyWhenTheVocabSaysSo) {
  ChatVocab v = MakeChatVocab();
  EXPECT_THAT(Build(v.spec)->Encode("a", {}), ElementsAre('a'));  // add_bos/add_eos false
  v.spec.add_bos = true;
  v.spec.add_eos = true;
  auto tok = Build(v.spec);
  EXPECT_THAT(tok->Encode("a", {}), ElementsAre(v.im_start, 'a', v.endoftext));
  EXPECT_THAT(tok->Encode("a", kPlain), ElementsAre('a'));
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), v.im_start);
  EXPECT_EQ(tok->eos_id(), v.endoftext);
}

TEST(SpecialTokenTest, EndOfGenerationCoversEosAndTurnEndTokens) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_TRUE(tok->IsEog(v.endoftext));
  EXPECT_TRUE(tok->IsEog(v.im_end));  // found by its text, as llama.cpp does
  EXPECT_FALSE(tok->IsEog(v.im_start));
  EXPECT_FALSE(tok->IsEog('a'));
  EXPECT_FALSE(tok->IsEog(-1));
  EXPECT_FALSE(tok->IsEog(tok->vocab_size()));
}

TEST(SpecialTokenTest, EotLookingNormalTokensBecomeControlTokens) {
  TokenizerSpec spec = ByteLevelSpec({});
  const int32_t im_end = AddToken(&spec, "<|im_end|>", TokenType::kNormal);
  auto tok = Build(spec);
  EXPECT_TRUE(tok->IsEog(im_end));
  EXPECT_THAT(tok->Encode("<|im_end|>", kParse), ElementsAre(im_end));
}

TEST(SpecialTokenTest, PiecesRenderSpecialTextUnlessSkipped) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  EXPECT_EQ(tok->TokenToPiece(v.im_start), "<|im_start|>");
  const std::vector<int32_t> ids = tok->Encode("<|im_start|>hi<tool><|im_end|>", kParse);
  EXPECT_EQ(tok->Decode(ids), "<|im_start|>hi<tool><|im_end|>");
  // skip_special drops control tokens; user-defined ones are text.
  EXPECT_EQ(tok->Decode(ids, {.skip_special = true}), "hi<tool>");
}

TEST(SpecialTokenTest, ChatMlPromptEncodesWithEverySpecialRecognised) {
  ChatVocab v = MakeChatVocab();
  auto tok = Build(v.spec);
  const std::vector<ChatMessage> messages = {{"user", "ab"}};
  const std::vector<int32_t> ids = tok->Encode(ApplyChatML(messages, true), kParse);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.im_start), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.im_end), 1);
}

}  // namespace
}  // namespace ripplekv::worker
