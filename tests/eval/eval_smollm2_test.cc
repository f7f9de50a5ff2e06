// Evaluation prompts with the real SmolLM2 tokenizer (needs RIPPLEKV_SMOLLM2_GGUF; the books come
// from the Debian package): exact passkey lengths with and without the chat template, needles
// that survive tokenization, kv-retrieval within the target, fidelity windows over Tom Sawyer, and
// 40 examples of every task at the default lengths in each split of Tom Sawyer.

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "eval/fidelity_task.h"
#include "eval/longbench.h"
#include "eval/split.h"
#include "eval/synthetic_tasks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/gguf_reader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::eval {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

class EvalSmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr || *path == '\0') return;
    auto gguf = worker::GgufFile::Open(path);
    if (!gguf.ok()) return;
    auto tokenizer = worker::TokenizerFromGguf(**gguf);
    if (!tokenizer.ok()) return;
    tokenizer_ = tokenizer->release();
    if (std::filesystem::exists(std::string(worker::kTomSawyer.path))) {
      auto corpus = LoadHaystackCorpus("tom-sawyer", *tokenizer_);
      if (corpus.ok()) corpus_ = new HaystackCorpus(*std::move(corpus));
    }
  }
  static void TearDownTestSuite() {
    delete corpus_;
    delete tokenizer_;
    corpus_ = nullptr;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set; point it at "
                      "SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model)";
    }
    ASSERT_NE(tokenizer_, nullptr) << "could not load the tokenizer of " << path;
    if (corpus_ == nullptr) {
      GTEST_SKIP() << worker::kTomSawyer.path << " is missing: install "
                   << worker::kTomSawyer.package;
    }
  }
  static worker::Tokenizer* tokenizer_;
  static HaystackCorpus* corpus_;
};

worker::Tokenizer* EvalSmolLm2Test::tokenizer_ = nullptr;
HaystackCorpus* EvalSmolLm2Test::corpus_ = nullptr;

TEST_F(EvalSmolLm2Test, TomSawyerIsAboutAHundredThousandTokens) {
  EXPECT_GT(corpus_->size(), 90000);
  EXPECT_LT(corpus_->size(), 120000);
}

TEST_F(EvalSmolLm2Test, PasskeyPromptsHaveExactLengthsWithAndWithoutChat) {
  for (bool chat : {false, true}) {
    for (int64_t len : {1024, 2048}) {
      auto examples = GenerateSynthetic(
          SyntheticTask::kPasskey, *corpus_, *tokenizer_,
          {.prompt_len = len, .num_examples = 4, .seed = 7, .chat = chat, .depth = 0.3});
      ASSERT_TRUE(examples.ok()) << examples.status();
      for (const EvalExample& ex : *examples) {
        EXPECT_EQ(static_cast<int64_t>(ex.prompt.size()), len);
        const std::string text = tokenizer_->Decode(ex.prompt);
        EXPECT_THAT(text, HasSubstr(" The pass key is " + ex.answers[0] + ". Remember it."));
        EXPECT_THAT(text, EndsWith("The pass key is"));
        if (chat) {
          EXPECT_THAT(text, HasSubstr("<|im_start|>user\nA pass key is hidden"));
          EXPECT_THAT(text, HasSubstr("<|im_end|>\n<|im_start|>assistant\nThe pass key is"));
        }
        // Re-encoding the decoded text gives nearly the same number of tokens (pieces are
        // joined at whitespace, where byte-level BPE splits anyway).
        const auto again = tokenizer_->Encode(text, {.add_special = false, .parse_special = chat});
        EXPECT_NEAR(static_cast<double>(again.size()), static_cast<double>(len), 8.0);
      }
    }
  }
}

TEST_F(EvalSmolLm2Test, MultiNeedleAndKvFitTheTarget) {
  auto multi = GenerateSynthetic(
      SyntheticTask::kMultiNeedle, *corpus_, *tokenizer_,
      {.prompt_len = 2048, .num_examples = 2, .chat = true, .num_needles = 4, .num_queries = 1});
  ASSERT_TRUE(multi.ok()) << multi.status();
  for (const EvalExample& ex : *multi) EXPECT_EQ(ex.prompt.size(), 2048u);
  for (KvFormat format : {KvFormat::kUuid, KvFormat::kShort}) {
    auto kv = GenerateSynthetic(
        SyntheticTask::kKvRetrieval, *corpus_, *tokenizer_,
        {.prompt_len = 2048, .num_examples = 2, .chat = true, .kv_format = format});
    ASSERT_TRUE(kv.ok()) << kv.status();
    for (const EvalExample& ex : *kv) {
      EXPECT_LE(ex.prompt.size(), 2048u);
      EXPECT_GT(ex.prompt.size(), 2048u - 80u);
    }
  }
}

TEST_F(EvalSmolLm2Test, FidelityWindowsOverTomSawyer) {
  auto examples = GenerateFidelity(
      *corpus_, *tokenizer_, {.context_len = 1024, .continuation_len = 64, .num_examples = 8});
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 8u);
  for (const EvalExample& ex : *examples) {
    EXPECT_EQ(ex.continuation.size(), 64u);
    EXPECT_GE(ex.prompt.size(), 1024u);
  }
}

TEST_F(EvalSmolLm2Test, FortyExamplesOfEveryTaskFitEachSplitOfTomSawyer) {
  // The split rule (split.h) is sized for this: 40 windows of 1024 + 64 tokens in half the book.
  for (EvalSplit split : {EvalSplit::kTest, EvalSplit::kValidation}) {
    SCOPED_TRACE(EvalSplitName(split));
    std::vector<EvalExample> all;
    auto fidelity = GenerateFidelity(*corpus_, *tokenizer_, {.num_examples = 40, .split = split});
    ASSERT_TRUE(fidelity.ok()) << fidelity.status();
    all.insert(all.end(), fidelity->begin(), fidelity->end());
    for (SyntheticTask task :
         {SyntheticTask::kPasskey, SyntheticTask::kKvRetrieval, SyntheticTask::kMultiNeedle}) {
      auto examples = GenerateSynthetic(task, *corpus_, *tokenizer_,
                                        {.num_examples = 40, .chat = true, .split = split});
      ASSERT_TRUE(examples.ok()) << examples.status();
      all.insert(all.end(), examples->begin(), examples->end());
    }
    EXPECT_EQ(all.size(), 160u);
    EXPECT_TRUE(CheckSplitConfinement(all, corpus_->size()).ok());
  }
}

TEST_F(EvalSmolLm2Test, LongBenchTruncationBoundsThePrompt) {
  LongBenchRecord r;
  r.dataset = "narrativeqa";
  r.context = std::string(corpus_->Text(0, 20000));
  r.input = "Who paints the fence?";
  r.answers = {"Tom"};
  r.source = "test:1";
  for (bool chat : {false, true}) {
    auto ex = MakeLongBenchExamples(std::vector<LongBenchRecord>{r}, {}, *tokenizer_,
                                    {.max_prompt_tokens = 3500, .chat = chat});
    ASSERT_TRUE(ex.ok()) << ex.status();
    EXPECT_LE((*ex)[0].prompt.size(), chat ? 3500u + 40u : 3500u);
    EXPECT_GE((*ex)[0].prompt.size(), 3500u);
    EXPECT_THAT(tokenizer_->Decode((*ex)[0].prompt), HasSubstr("Who paints the fence?"));
  }
}

}  // namespace
}  // namespace ripplekv::eval
