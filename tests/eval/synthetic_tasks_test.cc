// Synthetic tasks over generated prose with a byte-level tokenizer (token counts are byte counts):
// exact prompt lengths, needles present exactly once at the requested depth, answers that parse,
// determinism, chat prompts, errors. One test uses the Debian-installed book and skips without it.

#include "eval/synthetic_tasks.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/eval/eval_test_util.h"

namespace ripplekv::eval {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

size_t Count(std::string_view text, std::string_view part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

class SyntheticTasksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::ByteTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    auto corpus = HaystackCorpus::FromText("prose", testing::Prose(400), *tokenizer_);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = std::make_unique<HaystackCorpus>(*std::move(corpus));
  }

  std::vector<EvalExample> Generate(SyntheticTask task, const SyntheticOptions& options) {
    auto examples = GenerateSynthetic(task, *corpus_, *tokenizer_, options);
    EXPECT_TRUE(examples.ok()) << examples.status();
    return examples.ok() ? *std::move(examples) : std::vector<EvalExample>();
  }

  std::string Text(const std::vector<int32_t>& ids) const { return tokenizer_->Decode(ids); }

  std::unique_ptr<worker::Tokenizer> tokenizer_;
  std::unique_ptr<HaystackCorpus> corpus_;
};

TEST_F(SyntheticTasksTest, PasskeyHasExactLengthAndTheNeedleOnceAtTheDepth) {
  for (double depth : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    const auto examples =
        Generate(SyntheticTask::kPasskey,
                 {.prompt_len = 2000, .num_examples = 4, .seed = 3, .depth = depth});
    ASSERT_EQ(examples.size(), 4u);
    for (const EvalExample& ex : examples) {
      EXPECT_EQ(ex.prompt.size(), 2000u);
      EXPECT_EQ(ex.task, "passkey");
      EXPECT_EQ(ex.metric, MetricKind::kStringMatchAll);
      ASSERT_EQ(ex.answers.size(), 1u);
      const std::string& key = ex.answers[0];
      EXPECT_EQ(key.size(), 5u);
      EXPECT_TRUE(std::all_of(key.begin(), key.end(), ::isdigit));
      const std::string text = Text(ex.prompt);
      const std::string needle =
          " The pass key is " + key + ". Remember it. " + key + " is the pass key.";
      EXPECT_EQ(Count(text, needle), 1u) << text;
      EXPECT_EQ(Count(text, key), 2u);  // both inside the needle
      ASSERT_EQ(ex.needle_offsets.size(), 1u);
      EXPECT_EQ(text.substr(static_cast<size_t>(ex.needle_offsets[0]), needle.size()), needle);
      // Sentences of the prose are at most 60 bytes; the haystack is ~1800 bytes.
      EXPECT_NEAR(ex.needle_depths[0], depth, 60.0 / 1800.0);
      EXPECT_THAT(text, StartsWith("A pass key is hidden"));
      EXPECT_THAT(text, EndsWith("\n\nWhat is the pass key?\nThe pass key is"));
      EXPECT_DOUBLE_EQ(ScoreAnswer(ex, " " + key + "."), 1.0);
      EXPECT_EQ(ex.max_new_tokens, 16);
    }
  }
}

TEST_F(SyntheticTasksTest, SameSeedSameExamplesOtherSeedOthers) {
  const SyntheticOptions options{.prompt_len = 1500, .num_examples = 5, .seed = 11};
  for (SyntheticTask task :
       {SyntheticTask::kPasskey, SyntheticTask::kMultiNeedle, SyntheticTask::kKvRetrieval}) {
    const auto a = Generate(task, options);
    const auto b = Generate(task, options);
    SyntheticOptions other = options;
    other.seed = 12;
    const auto c = Generate(task, other);
    ASSERT_EQ(a.size(), 5u);
    ASSERT_EQ(c.size(), 5u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].prompt, b[i].prompt);
      EXPECT_EQ(a[i].answers, b[i].answers);
      EXPECT_EQ(a[i].id, b[i].id);
      EXPECT_NE(a[i].prompt, c[i].prompt);
      EXPECT_NE(a[i].answers, c[i].answers);
    }
    // Examples of one call differ from each other.
    EXPECT_NE(a[0].answers, a[1].answers);
  }
}

// Whether any two of the examples' corpus token ranges overlap.
bool AnyOverlap(const std::vector<EvalExample>& examples) {
  std::vector<TokenRange> ranges;
  for (const EvalExample& ex : examples) ranges.push_back(ex.corpus_tokens);
  std::sort(ranges.begin(), ranges.end(),
            [](const TokenRange& a, const TokenRange& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].begin < ranges[k - 1].end) return true;
  }
  return false;
}

TEST_F(SyntheticTasksTest, HaystacksOfASetThatFitsNeverOverlap) {
  for (EvalSplit split : {EvalSplit::kTest, EvalSplit::kValidation}) {
    const SyntheticOptions options{
        .prompt_len = 2000, .num_examples = 8, .seed = 5, .kv_pairs = 3, .split = split};
    const TokenRange region = SplitRegion(corpus_->size(), split);
    ASSERT_GE(region.size() / options.num_examples, options.prompt_len);
    for (SyntheticTask task :
         {SyntheticTask::kPasskey, SyntheticTask::kMultiNeedle, SyntheticTask::kKvRetrieval}) {
      SCOPED_TRACE(SyntheticTaskName(task));
      const auto examples = Generate(task, options);
      ASSERT_EQ(examples.size(), 8u);
      const int64_t stratum = region.size() / options.num_examples;
      for (size_t k = 0; k < examples.size(); ++k) {
        EXPECT_GE(examples[k].corpus_tokens.begin,
                  region.begin + static_cast<int64_t>(k) * stratum);
        EXPECT_LE(examples[k].corpus_tokens.end,
                  region.begin + static_cast<int64_t>(k + 1) * stratum);
      }
      EXPECT_FALSE(AnyOverlap(examples));
    }
  }
}

TEST_F(SyntheticTasksTest, ASetThatDoesNotFitStillDrawsFromTheRegion) {
  const TokenRange region = SplitRegion(corpus_->size(), EvalSplit::kTest);
  const SyntheticOptions options{
      .prompt_len = 2000, .num_examples = static_cast<int>(region.size() / 1500), .seed = 5};
  const auto examples = Generate(SyntheticTask::kPasskey, options);
  ASSERT_EQ(examples.size(), static_cast<size_t>(options.num_examples));
  for (const EvalExample& ex : examples) {
    EXPECT_EQ(ex.prompt.size(), 2000u);
    EXPECT_GE(ex.corpus_tokens.begin, region.begin);
    EXPECT_LE(ex.corpus_tokens.end, region.end);
  }
  EXPECT_TRUE(AnyOverlap(examples));  // more haystacks than the region holds
}

TEST_F(SyntheticTasksTest, DrawsArePinnedAcrossPlatforms) {
  // The first hex digits of SplitMix64(StreamSeed(1, 2, 0)) % 16, as an independent Python port
  // of rng.h prints them: 27dd682927d57869eca0acd6e23d3c99.
  const auto short_keys =
      Generate(SyntheticTask::kKvRetrieval,
               {.prompt_len = 400, .num_examples = 1, .seed = 1, .kv_format = KvFormat::kShort});
  ASSERT_EQ(short_keys.size(), 1u);
  EXPECT_THAT(Text(short_keys[0].prompt),
              HasSubstr("{\n  \"27dd6829\": \"27d57869\",\n  \"eca0acd6\": \"e23d3c99\","));
  const auto uuids =
      Generate(SyntheticTask::kKvRetrieval, {.prompt_len = 600, .num_examples = 1, .seed = 1});
  ASSERT_EQ(uuids.size(), 1u);
  EXPECT_THAT(Text(uuids[0].prompt), HasSubstr("{\n  \"27dd6829-27d5-4786-9eca-0acd6e23d3c9\""));
}

TEST_F(SyntheticTasksTest, IdsNameTheSettings) {
  const auto ex = Generate(SyntheticTask::kPasskey,
                           {.prompt_len = 800, .num_examples = 2, .seed = 9, .depth = 0.25});
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[1].id, "passkey/prose/test/L800/d0.25/s9/1");
}

TEST_F(SyntheticTasksTest, MultiNeedlePlacesEveryNeedleOnceAndAsksTheQueriedKeys) {
  const auto examples =
      Generate(SyntheticTask::kMultiNeedle, {.prompt_len = 3000,
                                             .num_examples = 3,
                                             .seed = 5,
                                             .num_needles = 4,
                                             .num_queries = 2,
                                             .needle_depths = {0.8, 0.2, 0.5, 0.05}});
  ASSERT_EQ(examples.size(), 3u);
  for (const EvalExample& ex : examples) {
    EXPECT_EQ(ex.prompt.size(), 3000u);
    ASSERT_EQ(ex.answers.size(), 2u);
    ASSERT_EQ(ex.needle_offsets.size(), 4u);
    const std::string text = Text(ex.prompt);
    // Needles appear in depth order: 0.05, 0.2, 0.5, 0.8.
    EXPECT_LT(ex.needle_offsets[3], ex.needle_offsets[1]);
    EXPECT_LT(ex.needle_offsets[1], ex.needle_offsets[2]);
    EXPECT_LT(ex.needle_offsets[2], ex.needle_offsets[0]);
    EXPECT_EQ(Count(text, "The special magic number for "), 4u);
    for (const std::string& value : ex.answers) {
      EXPECT_EQ(value.size(), 7u);
      EXPECT_EQ(Count(text, value), 1u);
      // The needle holding this value names a key that the question asks for.
      const size_t at = text.find(value);
      const size_t key_begin = text.rfind("number for ", at) + 11;
      const std::string key = text.substr(key_begin, text.find(" is: ", key_begin) - key_begin);
      EXPECT_THAT(text.substr(text.find("What are the special magic numbers for ")),
                  HasSubstr(key));
    }
    EXPECT_THAT(text, HasSubstr(" mentioned in the text are"));
    EXPECT_DOUBLE_EQ(ScoreAnswer(ex, ex.answers[0] + " and " + ex.answers[1]), 1.0);
    EXPECT_DOUBLE_EQ(ScoreAnswer(ex, ex.answers[1]), 0.5);
    EXPECT_EQ(ex.max_new_tokens, 48);
  }
}

TEST_F(SyntheticTasksTest, MultiNeedleDefaultDepthsSpreadEvenly) {
  const auto examples = Generate(SyntheticTask::kMultiNeedle,
                                 {.prompt_len = 4000, .num_examples = 1, .num_needles = 4});
  ASSERT_EQ(examples.size(), 1u);
  const std::vector<double> expected = {0.125, 0.375, 0.625, 0.875};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(examples[0].needle_depths[k], expected[k], 60.0 / 3500.0);
  }
}

// The text of the JSON object in a kv-retrieval prompt, from "{" to the matching "}".
nlohmann::json ParseJsonBlock(const std::string& text, size_t from) {
  const size_t open = text.find('{', from);
  const size_t close = text.find('}', open);
  return nlohmann::json::parse(text.substr(open, close - open + 1));
}

TEST_F(SyntheticTasksTest, KvFillIsPairsOnlyWithinOnePairOfTheTarget) {
  for (KvFormat format : {KvFormat::kUuid, KvFormat::kShort}) {
    const auto examples = Generate(
        SyntheticTask::kKvRetrieval,
        {.prompt_len = 1200, .num_examples = 3, .seed = 2, .depth = 0.3, .kv_format = format});
    ASSERT_EQ(examples.size(), 3u);
    const size_t pair_bytes = format == KvFormat::kUuid ? 2 * 36 + 10 : 2 * 8 + 10;
    for (const EvalExample& ex : examples) {
      EXPECT_LE(ex.prompt.size(), 1200u);
      // Short by less than one pair plus the difference between question lengths (none here:
      // all keys have the same length).
      EXPECT_GE(ex.prompt.size(), 1200u - pair_bytes);
      const std::string text = Text(ex.prompt);
      const nlohmann::json pairs = ParseJsonBlock(text, text.find("JSON data:"));
      ASSERT_TRUE(pairs.is_object());
      EXPECT_GE(pairs.size(), 2u);
      // The asked key is in the question; its value is the answer.
      const size_t q = text.find("What is the value of the key \"") + 30;
      const std::string key = text.substr(q, text.find('"', q) - q);
      ASSERT_TRUE(pairs.contains(key)) << key;
      EXPECT_EQ(pairs[key], ex.answers[0]);
      EXPECT_EQ(text.substr(static_cast<size_t>(ex.needle_offsets[0]), key.size() + 5),
                "\n  \"" + key + "\"");
      EXPECT_NEAR(ex.needle_depths[0], 0.3, 1.0 / static_cast<double>(pairs.size()));
      EXPECT_EQ(ex.max_new_tokens, format == KvFormat::kUuid ? 48 : 16);
    }
  }
}

TEST_F(SyntheticTasksTest, KvBlockSitsInTheProseAndHasExactLength) {
  const auto examples = Generate(SyntheticTask::kKvRetrieval, {.prompt_len = 2500,
                                                               .num_examples = 3,
                                                               .seed = 4,
                                                               .depth = 0.6,
                                                               .kv_pairs = 3,
                                                               .kv_format = KvFormat::kShort});
  ASSERT_EQ(examples.size(), 3u);
  for (const EvalExample& ex : examples) {
    EXPECT_EQ(ex.prompt.size(), 2500u);
    const std::string text = Text(ex.prompt);
    EXPECT_EQ(Count(text, "JSON data: {"), 1u);
    const nlohmann::json pairs = ParseJsonBlock(text, text.find("JSON data: {"));
    ASSERT_EQ(pairs.size(), 3u);
    const size_t q = text.find("What is the value of the key \"") + 30;
    const std::string key = text.substr(q, text.find('"', q) - q);
    EXPECT_EQ(pairs[key], ex.answers[0]);
    EXPECT_EQ(Count(text, ex.answers[0]), 1u);
    EXPECT_NEAR(ex.needle_depths[0], 0.6, 60.0 / 2300.0);
  }
}

TEST_F(SyntheticTasksTest, ChatPromptsWrapTheUserTurnAndEndInTheAssistantTurn) {
  for (bool bos : {false, true}) {
    testing::ChatVocab v = testing::ChatByteTokenizer(bos);
    ASSERT_NE(v.tokenizer, nullptr);
    auto examples =
        GenerateSynthetic(SyntheticTask::kPasskey, *corpus_, *v.tokenizer,
                          {.prompt_len = 1000, .num_examples = 2, .seed = 1, .chat = true});
    ASSERT_TRUE(examples.ok()) << examples.status();
    for (const EvalExample& ex : *examples) {
      EXPECT_EQ(ex.prompt.size(), 1000u);
      EXPECT_EQ(ex.prompt[0], bos ? v.bos : v.im_start);
      EXPECT_EQ(std::count(ex.prompt.begin(), ex.prompt.end(), v.im_start), 3);
      EXPECT_EQ(std::count(ex.prompt.begin(), ex.prompt.end(), v.im_end), 2);
      const std::string text = v.tokenizer->Decode(ex.prompt);
      EXPECT_THAT(text, HasSubstr("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
                                  "A pass key is hidden"));
      EXPECT_THAT(text, EndsWith("What is the pass key?<|im_end|>\n<|im_start|>assistant\n"
                                 "The pass key is"));
      EXPECT_EQ(Count(text, " The pass key is " + ex.answers[0] + "."), 1u);
    }
  }
}

TEST_F(SyntheticTasksTest, WithoutAnswerPrefixThePromptEndsWithTheQuestion) {
  const auto ex = Generate(SyntheticTask::kPasskey,
                           {.prompt_len = 700, .num_examples = 1, .answer_prefix = false});
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].prompt.size(), 700u);
  EXPECT_THAT(Text(ex[0].prompt), EndsWith("What is the pass key?"));
}

TEST_F(SyntheticTasksTest, RejectsBadOptionsAndPromptsThatCannotFit) {
  auto expect_invalid = [&](SyntheticTask task, const SyntheticOptions& o, std::string_view part) {
    auto r = GenerateSynthetic(task, *corpus_, *tokenizer_, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(part));
  };
  expect_invalid(SyntheticTask::kPasskey, {.prompt_len = 100}, "haystack would have");
  expect_invalid(SyntheticTask::kPasskey, {.prompt_len = 1000000}, "does not fit");
  expect_invalid(SyntheticTask::kPasskey, {.prompt_len = 10000000}, "prompt_len");
  expect_invalid(SyntheticTask::kPasskey, {.depth = 1.5}, "depth");
  expect_invalid(SyntheticTask::kPasskey, {.passkey_digits = 0}, "passkey_digits");
  expect_invalid(SyntheticTask::kMultiNeedle, {.num_needles = 2, .num_queries = 3}, "num_queries");
  expect_invalid(SyntheticTask::kMultiNeedle, {.num_needles = 2, .needle_depths = {0.5}},
                 "needle_depths");
  expect_invalid(SyntheticTask::kKvRetrieval, {.prompt_len = 120}, "fewer than two pairs");
  expect_invalid(SyntheticTask::kKvRetrieval, {.kv_pairs = -1}, "kv_pairs");
  expect_invalid(SyntheticTask::kPasskey, {.num_examples = 0}, "num_examples");
  // Chat without a chat template.
  auto chat = GenerateSynthetic(SyntheticTask::kPasskey, *corpus_, *tokenizer_, {.chat = true});
  EXPECT_EQ(chat.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SyntheticTasksTest, TaskNamesRoundTrip) {
  for (SyntheticTask t :
       {SyntheticTask::kPasskey, SyntheticTask::kKvRetrieval, SyntheticTask::kMultiNeedle}) {
    EXPECT_EQ(ParseSyntheticTask(SyntheticTaskName(t)), t);
  }
  EXPECT_EQ(ParseSyntheticTask("niah"), std::nullopt);
}

TEST(SyntheticTasksBookTest, PasskeyOverTomSawyerNeedleFollowsASentenceEnd) {
  if (!std::filesystem::exists(std::string(worker::kTomSawyer.path))) {
    GTEST_SKIP() << worker::kTomSawyer.path << " is missing: install "
                 << worker::kTomSawyer.package;
  }
  auto tokenizer = testing::ByteTokenizer();
  auto corpus = LoadHaystackCorpus("tom-sawyer", *tokenizer);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto examples = GenerateSynthetic(SyntheticTask::kPasskey, *corpus, *tokenizer,
                                    {.prompt_len = 8192, .num_examples = 6, .seed = 1});
  ASSERT_TRUE(examples.ok()) << examples.status();
  for (const EvalExample& ex : *examples) {
    EXPECT_EQ(ex.prompt.size(), 8192u);
    const std::string text = tokenizer->Decode(ex.prompt);
    EXPECT_EQ(Count(text, ex.answers[0]), 2u);
    // The byte before the needle ends a sentence (or a closing quote after one).
    const size_t at = static_cast<size_t>(ex.needle_offsets[0]);
    std::string before = text.substr(0, at);
    while (!before.empty() &&
           (before.back() == '"' || before.back() == '\'' || before.back() == '_' ||
            before.back() == ' ' || before.back() == ')' || before.back() == ']' ||
            before.back() == '\n')) {
      before.pop_back();
    }
    ASSERT_FALSE(before.empty());
    EXPECT_THAT(std::string(".!?"), HasSubstr(std::string(1, before.back())))
        << before.substr(before.size() - 40);
    EXPECT_THAT(ex.source, StartsWith("tom-sawyer@"));
  }
}

}  // namespace
}  // namespace ripplekv::eval
