// Malformed tokenizer specs are refused with a Status that says what is wrong.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {
namespace {

using testing::ByteLevelSpec;
using ::testing::HasSubstr;

void ExpectInvalid(TokenizerSpec spec, std::string_view message_part) {
  auto tokenizer = CreateTokenizer(std::move(spec));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << tokenizer.status();
  EXPECT_THAT(std::string(tokenizer.status().message()), HasSubstr(message_part));
}

TEST(TokenizerSpecTest, ValidSpecBuilds) {
  auto tokenizer = CreateTokenizer(ByteLevelSpec({{"a", "b"}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 257);
  EXPECT_EQ((*tokenizer)->bos_id(), -1);
}

TEST(TokenizerSpecTest, EmptyVocabularyIsRefused) {
  TokenizerSpec spec;
  ExpectInvalid(spec, "empty");
}

TEST(TokenizerSpecTest, MergeWithUnknownSideIsRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.merges.push_back({"a", "nope"});
  ExpectInvalid(spec, "merges[0]");
}

TEST(TokenizerSpecTest, MergeWhoseResultIsNotATokenIsRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.merges.push_back({"a", "b"});  // "ab" is not in the vocabulary
  ExpectInvalid(spec, "merged result");
}

TEST(TokenizerSpecTest, SpecialIdOutOfRangeIsRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.eos_id = 256;
  ExpectInvalid(spec, "eos_id = 256");
  spec.eos_id = -7;
  ExpectInvalid(spec, "eos_id = -7");
}

TEST(TokenizerSpecTest, AddBosWithoutBosIsRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.add_bos = true;
  ExpectInvalid(spec, "add_bos");
}

TEST(TokenizerSpecTest, DuplicateTokenIsRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.tokens.push_back("a");
  ExpectInvalid(spec, "duplicate token 'a'");
}

TEST(TokenizerSpecTest, ArraysOfTheWrongLengthAreRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.scores.assign(3, 0.0f);
  ExpectInvalid(spec, "scores");
  spec.scores.clear();
  spec.token_types.assign(300, 1);
  ExpectInvalid(spec, "token_types");
}

TEST(TokenizerSpecTest, UnknownModelAndPreTypeAreRefused) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.model = "bert";
  ExpectInvalid(spec, "bert");
  spec = ByteLevelSpec({}, "klingon");
  ExpectInvalid(spec, "klingon");
}

TEST(TokenizerSpecTest, EmptyTokenTextIsRenamedNotMatched) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.tokens.push_back("");
  spec.token_types.assign(spec.tokens.size(), 1);
  spec.token_types.back() = static_cast<int32_t>(TokenType::kUserDefined);
  auto tokenizer = CreateTokenizer(spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("ab", {}), (std::vector<int32_t>{'a', 'b'}));
}

TEST(TokenizerSpecTest, OddTokenTypesAndByteTextsDoNotCrash) {
  TokenizerSpec spec = ByteLevelSpec({});
  spec.tokens.push_back("<0x");  // a BYTE token too short to hold its hex digits
  spec.token_types.assign(spec.tokens.size(), 99);
  spec.token_types.back() = static_cast<int32_t>(TokenType::kByte);
  auto tokenizer = CreateTokenizer(spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->TokenToPiece(0), "");  // undefined type renders nothing
  EXPECT_EQ((*tokenizer)->TokenToPiece(256).size(), 1u);
}

}  // namespace
}  // namespace ripplekv::worker
