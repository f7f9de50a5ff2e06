// HaystackCorpus (paragraph starts, sentence boundaries) and BuildHaystack (exact lengths, needles
// at the nearest sentence boundary, the split's region, determinism, errors).

#include "eval/haystack.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "eval/split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

using base::SplitMix64;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

class HaystackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }
  std::unique_ptr<worker::Tokenizer> tokenizer_;
};

TEST_F(HaystackTest, FindsSentenceBoundariesAndParagraphStarts) {
  const std::string text = "Mr. Smith went home. He slept!\n\nNew \"para?\" Yes.";
  auto corpus = HaystackCorpus::FromText("t", text, *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->size(), static_cast<int64_t>(text.size()));
  EXPECT_EQ(corpus->Text(4, 9), "Smith");
  std::vector<int64_t> boundaries;
  for (int64_t i = 1; i < corpus->size(); ++i) {
    if (corpus->SentenceBoundary(i)) boundaries.push_back(i);
  }
  // Not after "Mr."; after "home.", after "slept!" (before each newline), after "para?\"".
  EXPECT_THAT(boundaries, ElementsAre(20, 30, 31, 43));
  EXPECT_THAT(corpus->paragraph_starts(), ElementsAre(0, 32));
}

TEST_F(HaystackTest, InitialsAreNotSentenceEnds) {
  auto corpus = HaystackCorpus::FromText("t", "J. Smith. Then", *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  EXPECT_FALSE(corpus->SentenceBoundary(2));
  EXPECT_TRUE(corpus->SentenceBoundary(9));
}

TEST_F(HaystackTest, BuildsExactLengthWithNeedlesAtNearestBoundary) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(40), *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const std::vector<std::vector<int32_t>> needles = {Bytes(" NEEDLE-A."), Bytes(" NEEDLE-B.")};
  const std::vector<double> depths = {0.75, 0.25};
  SplitMix64 rng(7);
  auto hay = BuildHaystack(*corpus, EvalSplit::kTest, 1000, needles, depths, rng);
  ASSERT_TRUE(hay.ok()) << hay.status();
  EXPECT_EQ(hay->tokens.size(), 1000u + needles[0].size() + needles[1].size());
  // Prose starts at a paragraph start and is copied in order.
  const auto& starts = corpus->paragraph_starts();
  EXPECT_TRUE(std::find(starts.begin(), starts.end(), hay->corpus_begin) != starts.end());
  // B (depth 0.25) comes before A (0.75).
  EXPECT_LT(hay->needle_offsets[1], hay->needle_offsets[0]);
  for (size_t k = 0; k < needles.size(); ++k) {
    const std::vector<int32_t> got(
        hay->tokens.begin() + hay->needle_offsets[k],
        hay->tokens.begin() + hay->needle_offsets[k] + static_cast<int64_t>(needles[k].size()));
    EXPECT_EQ(got, needles[k]);
    // Sentences are at most 60 bytes: the nearest boundary is within 60 of the target.
    EXPECT_NEAR(hay->needle_depths[k], depths[k], 60.0 / 1000.0);
    // The prose position is a sentence boundary.
    const int64_t prose_pos = std::llround(hay->needle_depths[k] * 1000.0);
    EXPECT_TRUE(corpus->SentenceBoundary(hay->corpus_begin + prose_pos));
  }
}

TEST_F(HaystackTest, DepthZeroAndOnePutTheNeedleAtTheEnds) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(40), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const std::vector<std::vector<int32_t>> needles = {Bytes("X"), Bytes("Y")};
  const std::vector<double> depths = {0.0, 1.0};
  SplitMix64 rng(1);
  auto hay = BuildHaystack(*corpus, EvalSplit::kTest, 500, needles, depths, rng);
  ASSERT_TRUE(hay.ok());
  EXPECT_EQ(hay->needle_offsets[0], 0);
  EXPECT_EQ(hay->needle_offsets[1], 501);
  EXPECT_DOUBLE_EQ(hay->needle_depths[0], 0.0);
  EXPECT_DOUBLE_EQ(hay->needle_depths[1], 1.0);
}

TEST_F(HaystackTest, SameSeedSameHaystack) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(200), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  SplitMix64 a(42), b(42), c(43);
  auto ha = BuildHaystack(*corpus, EvalSplit::kTest, 300, {}, {}, a);
  auto hb = BuildHaystack(*corpus, EvalSplit::kTest, 300, {}, {}, b);
  auto hc = BuildHaystack(*corpus, EvalSplit::kTest, 300, {}, {}, c);
  ASSERT_TRUE(ha.ok() && hb.ok() && hc.ok());
  EXPECT_EQ(ha->tokens, hb->tokens);
  EXPECT_NE(ha->corpus_begin, hc->corpus_begin);
}

TEST_F(HaystackTest, RejectsWhatCannotBeBuilt) {
  auto corpus = HaystackCorpus::FromText("small", testing::Prose(2), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  SplitMix64 rng(0);
  auto too_long = BuildHaystack(*corpus, EvalSplit::kTest, 100000, {}, {}, rng);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("corpus small has"));
  EXPECT_FALSE(BuildHaystack(*corpus, EvalSplit::kTest, 0, {}, {}, rng).ok());
  const std::vector<std::vector<int32_t>> one = {Bytes("x")};
  const std::vector<double> bad_depth = {1.5};
  EXPECT_FALSE(BuildHaystack(*corpus, EvalSplit::kTest, 10, one, bad_depth, rng).ok());
  EXPECT_FALSE(BuildHaystack(*corpus, EvalSplit::kTest, 10, one, {}, rng).ok());
  EXPECT_FALSE(HaystackCorpus::FromText("empty", "", *tokenizer_).ok());
}

TEST_F(HaystackTest, HaystacksOfASplitStayInItsRegionAndStartParagraphs) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(60), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const auto& starts = corpus->paragraph_starts();
  for (EvalSplit split : {EvalSplit::kTest, EvalSplit::kValidation}) {
    SCOPED_TRACE(EvalSplitName(split));
    const TokenRange region = SplitRegion(corpus->size(), split);
    std::set<int64_t> begins;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      SplitMix64 rng(seed);
      auto hay = BuildHaystack(*corpus, split, 700, {}, {}, rng);
      ASSERT_TRUE(hay.ok()) << hay.status();
      EXPECT_EQ(hay->region, region);
      EXPECT_GE(hay->corpus_begin, region.begin);
      EXPECT_LE(hay->corpus_begin + 700, region.end);
      EXPECT_TRUE(std::binary_search(starts.begin(), starts.end(), hay->corpus_begin));
      begins.insert(hay->corpus_begin);
    }
    EXPECT_GT(begins.size(), 5u);  // the draws spread over the region
  }
}

TEST_F(HaystackTest, WithoutAParagraphStartInTheRegionAnyTokenOfItMayStart) {
  std::string one_paragraph;  // no blank line: the only paragraph start is token 0
  for (int i = 0; i < 100; ++i) one_paragraph += "The clerk counted the boxes again. ";
  auto corpus = HaystackCorpus::FromText("flat", one_paragraph, *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  ASSERT_EQ(corpus->paragraph_starts().size(), 1u);
  const TokenRange region = SplitRegion(corpus->size(), EvalSplit::kValidation);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SplitMix64 rng(seed);
    auto hay = BuildHaystack(*corpus, EvalSplit::kValidation, 300, {}, {}, rng);
    ASSERT_TRUE(hay.ok()) << hay.status();
    EXPECT_GE(hay->corpus_begin, region.begin);
    EXPECT_LE(hay->corpus_begin + 300, region.end);
  }
}

TEST_F(HaystackTest, HaystacksOfASetThatFitsTakeOneStratumEachAndNeverOverlap) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(200), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const auto& starts = corpus->paragraph_starts();
  for (EvalSplit split : {EvalSplit::kTest, EvalSplit::kValidation}) {
    SCOPED_TRACE(EvalSplitName(split));
    const TokenRange region = SplitRegion(corpus->size(), split);
    constexpr int64_t kCount = 8, kLen = 3000;
    const int64_t stratum = region.size() / kCount;
    ASSERT_GE(stratum, kLen);
    std::vector<int64_t> begins;
    for (int64_t k = 0; k < kCount; ++k) {
      SplitMix64 rng(static_cast<uint64_t>(k));
      auto hay = BuildHaystack(*corpus, split, kLen, {}, {}, rng, {.index = k, .count = kCount});
      ASSERT_TRUE(hay.ok()) << hay.status();
      EXPECT_GE(hay->corpus_begin, region.begin + k * stratum);
      EXPECT_LE(hay->corpus_begin + kLen, region.begin + (k + 1) * stratum);
      EXPECT_TRUE(std::binary_search(starts.begin(), starts.end(), hay->corpus_begin));
      begins.push_back(hay->corpus_begin);
    }
    for (size_t k = 1; k < begins.size(); ++k) EXPECT_GE(begins[k], begins[k - 1] + kLen);
  }
}

TEST_F(HaystackTest, ASetThatDoesNotFitDrawsFromTheWholeRegion) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(200), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const TokenRange region = SplitRegion(corpus->size(), EvalSplit::kTest);
  constexpr int64_t kLen = 3000;
  const int64_t count = region.size() / kLen + 1;  // strata shorter than a haystack
  std::vector<int64_t> begins;
  for (int64_t k = 0; k < count; ++k) {
    SplitMix64 rng(static_cast<uint64_t>(k)), whole(static_cast<uint64_t>(k));
    auto hay =
        BuildHaystack(*corpus, EvalSplit::kTest, kLen, {}, {}, rng, {.index = k, .count = count});
    auto unstratified = BuildHaystack(*corpus, EvalSplit::kTest, kLen, {}, {}, whole);
    ASSERT_TRUE(hay.ok() && unstratified.ok()) << hay.status();
    EXPECT_EQ(hay->corpus_begin, unstratified->corpus_begin);  // the same uniform draw
    EXPECT_GE(hay->corpus_begin, region.begin);
    EXPECT_LE(hay->corpus_begin + kLen, region.end);
    begins.push_back(hay->corpus_begin);
  }
  std::sort(begins.begin(), begins.end());
  bool overlap = false;
  for (size_t k = 1; k < begins.size(); ++k) overlap |= begins[k] < begins[k - 1] + kLen;
  EXPECT_TRUE(overlap);  // count haystacks of kLen tokens cannot all fit
}

TEST_F(HaystackTest, AStratumWithoutAParagraphStartMayStartAtAnyOfItsTokens) {
  std::string one_paragraph;  // no blank line: the only paragraph start is token 0
  for (int i = 0; i < 100; ++i) one_paragraph += "The clerk counted the boxes again. ";
  auto corpus = HaystackCorpus::FromText("flat", one_paragraph, *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const TokenRange region = SplitRegion(corpus->size(), EvalSplit::kTest);
  const int64_t stratum = region.size() / 2;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SplitMix64 rng(seed);
    auto hay = BuildHaystack(*corpus, EvalSplit::kTest, 300, {}, {}, rng, {.index = 1, .count = 2});
    ASSERT_TRUE(hay.ok()) << hay.status();
    EXPECT_GE(hay->corpus_begin, region.begin + stratum);
    EXPECT_LE(hay->corpus_begin + 300, region.begin + 2 * stratum);
  }
}

TEST_F(HaystackTest, AStratumOutsideItsCountIsInvalidArgument) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(20), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  SplitMix64 rng(0);
  for (HaystackStratum bad :
       {HaystackStratum{.index = 0, .count = 0}, HaystackStratum{.index = 3, .count = 3},
        HaystackStratum{.index = -1, .count = 2}}) {
    EXPECT_EQ(BuildHaystack(*corpus, EvalSplit::kTest, 100, {}, {}, rng, bad).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(HaystackTest, ARegionTooShortNamesTheCorpusSizeNeeded) {
  auto corpus = HaystackCorpus::FromText("small", testing::Prose(10), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const int64_t half = corpus->size() / 2;
  SplitMix64 rng(0);
  // Fits the whole corpus but not half of it.
  auto r = BuildHaystack(*corpus, EvalSplit::kValidation, half + 10, {}, {}, rng);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("does not fit in its validation region [" + std::to_string(half) + ", "));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("needs a corpus of at least " + std::to_string(2 * (half + 10))));
}

TEST_F(HaystackTest, BuiltinCorporaByName) {
  EXPECT_TRUE(FindBuiltinCorpus("tom-sawyer").ok());
  EXPECT_TRUE(FindBuiltinCorpus("sherlock-holmes").ok());
  EXPECT_EQ(FindBuiltinCorpus("moby-dick").status().code(), absl::StatusCode::kInvalidArgument);
  if (!std::filesystem::exists(std::string(worker::kTomSawyer.path))) {
    GTEST_SKIP() << worker::kTomSawyer.path << " is missing: install "
                 << worker::kTomSawyer.package;
  }
  auto corpus = LoadHaystackCorpus("tom-sawyer", *tokenizer_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_GT(corpus->size(), 300000);  // bytes of the stripped book
  EXPECT_GT(corpus->paragraph_starts().size(), 1000u);
}

}  // namespace
}  // namespace ripplekv::eval
