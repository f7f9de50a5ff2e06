// Fidelity windows (disjoint, deterministic, contiguous corpus text) and ScoreFidelity against
// hand-computed KL, top-1 agreement and NLL.

#include "eval/fidelity_task.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

using ::testing::HasSubstr;

class FidelityTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    auto corpus = HaystackCorpus::FromText("prose", testing::Prose(100), *tokenizer_);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = std::make_unique<HaystackCorpus>(*std::move(corpus));
  }
  std::unique_ptr<worker::Tokenizer> tokenizer_;
  std::unique_ptr<HaystackCorpus> corpus_;
};

TEST_F(FidelityTaskTest, WindowsAreDisjointContiguousAndDeterministic) {
  const FidelityOptions options{
      .context_len = 1000, .continuation_len = 50, .num_examples = 6, .seed = 3};
  auto a = GenerateFidelity(*corpus_, *tokenizer_, options);
  auto b = GenerateFidelity(*corpus_, *tokenizer_, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a->size(), 6u);
  const auto tokens = corpus_->tokens();
  int64_t previous_end = 0;
  for (size_t k = 0; k < a->size(); ++k) {
    const EvalExample& ex = (*a)[k];
    EXPECT_EQ(ex.task, "fidelity");
    EXPECT_EQ(ex.metric, MetricKind::kFidelity);
    ASSERT_EQ(ex.prompt.size(), 1000u);
    ASSERT_EQ(ex.continuation.size(), 50u);
    const int64_t begin = std::stoll(ex.id.substr(ex.id.find('@') + 1));
    EXPECT_EQ(ex.id, "fidelity/prose/test@" + std::to_string(begin));
    EXPECT_GE(begin, previous_end);  // no overlap, in order
    previous_end = begin + 1050;
    EXPECT_TRUE(std::equal(ex.prompt.begin(), ex.prompt.end(), tokens.begin() + begin));
    EXPECT_TRUE(
        std::equal(ex.continuation.begin(), ex.continuation.end(), tokens.begin() + begin + 1000));
    EXPECT_EQ(ex.prompt, (*b)[k].prompt);
  }
  auto c =
      GenerateFidelity(*corpus_, *tokenizer_,
                       {.context_len = 1000, .continuation_len = 50, .num_examples = 6, .seed = 4});
  ASSERT_TRUE(c.ok());
  int differing = 0;
  for (size_t k = 0; k < c->size(); ++k) differing += (*c)[k].id != (*a)[k].id;
  EXPECT_GT(differing, 0);
}

TEST_F(FidelityTaskTest, BosIsPrependedWhenTheVocabularyAddsOne) {
  testing::ChatVocab v = testing::ChatByteTokenizer(/*bos=*/true);
  auto corpus = HaystackCorpus::FromText("prose", testing::Prose(20), *v.tokenizer);
  ASSERT_TRUE(corpus.ok());
  auto ex = GenerateFidelity(*corpus, *v.tokenizer,
                             {.context_len = 100, .continuation_len = 10, .num_examples = 2});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ((*ex)[0].prompt.size(), 101u);
  EXPECT_EQ((*ex)[0].prompt[0], v.bos);
}

TEST_F(FidelityTaskTest, RejectsWindowsThatDoNotFit) {
  auto r = GenerateFidelity(*corpus_, *tokenizer_,
                            {.context_len = 100000, .continuation_len = 10, .num_examples = 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("do not fit"));
  EXPECT_FALSE(GenerateFidelity(*corpus_, *tokenizer_, {.continuation_len = 0}).ok());
}

TEST(ScoreFidelityTest, MatchesHandComputedValues) {
  // Two positions, vocabulary of 2. Position 0: full (0, 0) -> (1/2, 1/2), compressed
  // (ln 3, 0) -> (3/4, 1/4); KL = 1/2 ln(4/3); argmax 0 and 0 agree; target 1: NLL ln 2 and ln 4.
  // Position 1: identical logits (2, 0), target 0: KL 0, agree, NLL ln(1 + e^-2) for both.
  const std::vector<float> full = {0.0f, 0.0f, 2.0f, 0.0f};
  const std::vector<float> compressed = {static_cast<float>(std::log(3.0)), 0.0f, 2.0f, 0.0f};
  const std::vector<int32_t> continuation = {1, 0};
  auto s = ScoreFidelity(full, compressed, 2, continuation);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->kl, 0.5 * 0.5 * std::log(4.0 / 3.0), 1e-6);
  EXPECT_DOUBLE_EQ(s->top1, 1.0);
  const double tail = std::log1p(std::exp(-2.0));
  EXPECT_NEAR(s->nll_full, (std::log(2.0) + tail) / 2, 1e-6);
  EXPECT_NEAR(s->nll_compressed, (std::log(4.0) + tail) / 2, 1e-6);
  EXPECT_NEAR(s->delta_nll(), std::log(2.0) / 2, 1e-6);
}

TEST(ScoreFidelityTest, CountsTop1DisagreementsAndTiesGoToTheLowestId) {
  const std::vector<float> full = {1, 1, 0, 0, 5, 0};        // argmax 0 (tie), 1
  const std::vector<float> compressed = {0, 1, 0, 0, 5, 0};  // argmax 1, 1
  auto s = ScoreFidelity(full, compressed, 3, std::vector<int32_t>{0, 1});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->top1, 0.5);
  EXPECT_GT(s->kl, 0.0);
}

TEST(ScoreFidelityTest, RejectsBadShapesIdsAndNaN) {
  const std::vector<float> four(4, 0.0f);
  const std::vector<float> three(3, 0.0f);
  EXPECT_FALSE(ScoreFidelity(four, three, 2, std::vector<int32_t>{0, 1}).ok());
  EXPECT_FALSE(ScoreFidelity(four, four, 2, std::vector<int32_t>{0, 2}).ok());
  EXPECT_FALSE(ScoreFidelity(four, four, 2, std::vector<int32_t>{}).ok());
  EXPECT_FALSE(ScoreFidelity(four, four, int64_t{1} << 62, std::vector<int32_t>{0, 1}).ok());
  std::vector<float> nan = four;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  auto r = ScoreFidelity(four, nan, 2, std::vector<int32_t>{0, 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> inf = four;
  inf[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(ScoreFidelity(inf, four, 2, std::vector<int32_t>{0, 1}).ok());
  // -inf is a zero-probability token: fine unless it is the target.
  std::vector<float> masked = four;
  masked[1] = -std::numeric_limits<float>::infinity();
  auto m = ScoreFidelity(masked, masked, 2, std::vector<int32_t>{0, 0});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->kl, 0.0);
  EXPECT_NEAR(m->nll_full, std::log(2.0) / 2, 1e-9);  // position 0 certain, position 1 ln 2
}

}  // namespace
}  // namespace ripplekv::eval
