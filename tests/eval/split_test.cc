// Test and validation splits: the regions are disjoint halves, every generated example stays in
// its split's region over many seeds and corpus sizes, the validation split draws other values,
// and CheckSplitConfinement fails loudly on an example that breaks the contract.

#include "eval/split.h"

#include <string>
#include <vector>

#include "eval/fidelity_task.h"
#include "eval/synthetic_tasks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

using ::testing::HasSubstr;

constexpr EvalSplit kSplits[] = {EvalSplit::kTest, EvalSplit::kValidation};

TEST(SplitRegionTest, HalvesAreDisjointAndCoverTheCorpus) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1001}, int64_t{104000},
                    int64_t{1} << 40}) {
    SCOPED_TRACE(n);
    const TokenRange test = SplitRegion(n, EvalSplit::kTest);
    const TokenRange validation = SplitRegion(n, EvalSplit::kValidation);
    EXPECT_EQ(test.begin, 0);
    EXPECT_EQ(test.end, validation.begin);
    EXPECT_EQ(validation.end, n);
    EXPECT_EQ(test.size(), n / 2);
    EXPECT_FALSE(test.Intersects(validation));
    EXPECT_GE(CorpusTokensForRegion(test.size()), n - 1);
  }
  // A region of R tokens in both splits needs 2R corpus tokens, and 2R - 1 are too few for test.
  EXPECT_EQ(SplitRegion(CorpusTokensForRegion(500), EvalSplit::kTest).size(), 500);
  EXPECT_EQ(SplitRegion(CorpusTokensForRegion(500), EvalSplit::kValidation).size(), 500);
  EXPECT_EQ(SplitRegion(CorpusTokensForRegion(500) - 1, EvalSplit::kTest).size(), 499);
}

TEST(SplitRegionTest, NamesRoundTripAndStreamsDiffer) {
  for (EvalSplit s : kSplits) EXPECT_EQ(ParseEvalSplit(EvalSplitName(s)), s);
  EXPECT_EQ(ParseEvalSplit("val"), std::nullopt);
  // Test streams are the generators' own ids (the draws before splits existed); validation
  // streams are outside that domain.
  for (uint64_t stream : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{100}}) {
    EXPECT_EQ(SplitStream(stream, EvalSplit::kTest), stream);
    EXPECT_GE(SplitStream(stream, EvalSplit::kValidation), uint64_t{1} << 32);
  }
}

TEST(TokenRangeTest, IntersectsAndContains) {
  const TokenRange r{10, 20};
  EXPECT_TRUE(r.Intersects({19, 25}));
  EXPECT_FALSE(r.Intersects({20, 25}));
  EXPECT_FALSE(r.Intersects({5, 10}));
  EXPECT_FALSE(r.Intersects({15, 15}));  // empty
  EXPECT_TRUE(r.Contains({10, 20}));
  EXPECT_TRUE(r.Contains({0, 0}));  // empty
  EXPECT_FALSE(r.Contains({9, 12}));
}

// Every task and split over corpora of several sizes and many seeds.
class SplitConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }
  std::unique_ptr<worker::Tokenizer> tokenizer_;
};

TEST_F(SplitConfinementTest, EveryExampleStaysInItsRegionOverManySeedsAndSizes) {
  for (int paragraphs : {12, 31, 90}) {
    auto corpus = HaystackCorpus::FromText("prose", testing::Prose(paragraphs), *tokenizer_);
    ASSERT_TRUE(corpus.ok());
    const auto tokens = corpus->tokens();
    for (EvalSplit split : kSplits) {
      const TokenRange region = SplitRegion(corpus->size(), split);
      const TokenRange other = SplitRegion(
          corpus->size(), split == EvalSplit::kTest ? EvalSplit::kValidation : EvalSplit::kTest);
      for (uint64_t seed = 0; seed < 12; ++seed) {
        SCOPED_TRACE(::testing::Message()
                     << paragraphs << " paragraphs, " << EvalSplitName(split) << ", seed " << seed);
        std::vector<EvalExample> all;
        auto fidelity = GenerateFidelity(*corpus, *tokenizer_,
                                         {.context_len = 300,
                                          .continuation_len = 20,
                                          .num_examples = 3 + static_cast<int>(seed % 3),
                                          .seed = seed,
                                          .split = split});
        ASSERT_TRUE(fidelity.ok()) << fidelity.status();
        for (const EvalExample& ex : *fidelity) {
          // The window is the corpus text of its recorded range.
          ASSERT_EQ(ex.corpus_tokens.size(), 320);
          EXPECT_TRUE(std::equal(ex.prompt.begin(), ex.prompt.end(),
                                 tokens.begin() + ex.corpus_tokens.begin));
        }
        all.insert(all.end(), fidelity->begin(), fidelity->end());
        for (SyntheticTask task :
             {SyntheticTask::kPasskey, SyntheticTask::kMultiNeedle, SyntheticTask::kKvRetrieval}) {
          SyntheticOptions o{.prompt_len = 600 + 90 * static_cast<int64_t>(seed % 4),
                             .num_examples = 4,
                             .seed = seed,
                             .kv_pairs = seed % 2 == 0 ? 0 : 3,
                             .kv_format = KvFormat::kShort,
                             .split = split};
          auto examples = GenerateSynthetic(task, *corpus, *tokenizer_, o);
          ASSERT_TRUE(examples.ok()) << examples.status();
          for (const EvalExample& ex : *examples) {
            if (task == SyntheticTask::kPasskey) {
              // The prompt holds the corpus text of the recorded range, the needle cut out.
              std::string text = tokenizer_->Decode(ex.prompt);
              const std::string needle = " The pass key is " + ex.answers[0] + ". Remember it. " +
                                         ex.answers[0] + " is the pass key.";
              text.erase(text.find(needle), needle.size());
              EXPECT_THAT(text, HasSubstr(std::string(
                                    corpus->Text(ex.corpus_tokens.begin, ex.corpus_tokens.end))));
            }
          }
          all.insert(all.end(), examples->begin(), examples->end());
        }
        for (const EvalExample& ex : all) {
          ASSERT_EQ(ex.split, split) << ex.id;
          EXPECT_EQ(ex.split_region, region) << ex.id;
          EXPECT_TRUE(region.Contains(ex.corpus_tokens)) << ex.id;
          EXPECT_FALSE(ex.corpus_tokens.Intersects(other)) << ex.id;
          EXPECT_THAT(ex.id, HasSubstr(std::string("/") + std::string(EvalSplitName(split))));
          const bool generated_body = ex.task == "kv-retrieval" && seed % 2 == 0;
          EXPECT_EQ(ex.corpus_tokens.empty(), generated_body) << ex.id;
        }
        EXPECT_TRUE(CheckSplitConfinement(all, corpus->size()).ok());
      }
    }
  }
}

TEST_F(SplitConfinementTest, ValidationDrawsOtherValuesThanTestForTheSameSeed) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(200), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  for (SyntheticTask task :
       {SyntheticTask::kPasskey, SyntheticTask::kMultiNeedle, SyntheticTask::kKvRetrieval}) {
    SyntheticOptions o{.prompt_len = 900, .num_examples = 6, .seed = 5};
    auto test = GenerateSynthetic(task, *corpus, *tokenizer_, o);
    o.split = EvalSplit::kValidation;
    auto validation = GenerateSynthetic(task, *corpus, *tokenizer_, o);
    ASSERT_TRUE(test.ok() && validation.ok());
    for (size_t i = 0; i < test->size(); ++i) {
      EXPECT_NE((*test)[i].answers, (*validation)[i].answers) << (*test)[i].id;
      EXPECT_NE((*test)[i].id, (*validation)[i].id);
      EXPECT_THAT((*validation)[i].id, HasSubstr("/prose/validation/L900/"));
    }
  }
  // Fidelity: the windows of the splits share no token, in order and disjoint within a split.
  auto test = GenerateFidelity(*corpus, *tokenizer_,
                               {.context_len = 500, .continuation_len = 20, .num_examples = 8});
  auto validation = GenerateFidelity(*corpus, *tokenizer_,
                                     {.context_len = 500,
                                      .continuation_len = 20,
                                      .num_examples = 8,
                                      .split = EvalSplit::kValidation});
  ASSERT_TRUE(test.ok() && validation.ok());
  int64_t previous_end = SplitRegion(corpus->size(), EvalSplit::kValidation).begin;
  for (const EvalExample& v : *validation) {
    EXPECT_GE(v.corpus_tokens.begin, previous_end);
    previous_end = v.corpus_tokens.end;
    for (const EvalExample& t : *test) EXPECT_FALSE(v.corpus_tokens.Intersects(t.corpus_tokens));
  }
}

TEST_F(SplitConfinementTest, TheCheckFailsLoudlyOnAnExampleOutsideItsRegion) {
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(40), *tokenizer_);
  ASSERT_TRUE(corpus.ok());
  const int64_t n = corpus->size();
  auto examples = GenerateFidelity(*corpus, *tokenizer_,
                                   {.context_len = 200,
                                    .continuation_len = 10,
                                    .num_examples = 3,
                                    .split = EvalSplit::kValidation});
  ASSERT_TRUE(examples.ok());
  ASSERT_TRUE(CheckSplitConfinement(*examples, n).ok());
  const TokenRange region = SplitRegion(n, EvalSplit::kValidation);

  // A window that reaches one token back into the test region.
  std::vector<EvalExample> leaking = *examples;
  leaking[1].corpus_tokens = {region.begin - 1, region.begin + 209};
  Status st = CheckSplitConfinement(leaking, n);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(st.message()), HasSubstr(leaking[1].id));
  EXPECT_THAT(std::string(st.message()), HasSubstr("intersect the test region"));

  // A test example inside the validation region.
  std::vector<EvalExample> swapped = *examples;
  swapped[0].split = EvalSplit::kTest;
  swapped[0].split_region = SplitRegion(n, EvalSplit::kTest);
  st = CheckSplitConfinement(swapped, n);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(st.message()), HasSubstr("intersect the validation region"));

  // A region that is not the rule's (e.g. generated from another corpus).
  std::vector<EvalExample> foreign = *examples;
  foreign[2].split_region = {region.begin + 1, region.end};
  st = CheckSplitConfinement(foreign, n);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(st.message()), HasSubstr("records the region"));

  // Past the end of the corpus.
  std::vector<EvalExample> past = *examples;
  past[2].corpus_tokens = {n - 5, n + 5};
  EXPECT_EQ(CheckSplitConfinement(past, n).code(), absl::StatusCode::kInternal);

  // Examples without a split (LongBench) are not the check's business.
  EvalExample longbench;
  longbench.corpus_tokens = {0, n};
  EXPECT_TRUE(CheckSplitConfinement(std::vector<EvalExample>{longbench}, n).ok());
}

}  // namespace
}  // namespace ripplekv::eval
