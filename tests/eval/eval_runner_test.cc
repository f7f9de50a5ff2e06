// EvaluateExample on SmolLM2 (needs RIPPLEKV_SMOLLM2_GGUF; the books come from the Debian
// package): one prefill serves every method and budget and gives the same records as one prefill
// per method; a budget at least the prompt length is the full cache exactly; the full cache
// scores itself KL 0, top-1 1; kept memory is what the budgets say; records cover every
// method x budget.

#include "eval/eval_runner.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "eval/fidelity_task.h"
#include "eval/synthetic_tasks.h"
#include "gtest/gtest.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "worker/model/gguf_reader.h"
#include "worker/model/model_loader.h"

namespace ripplekv::eval {
namespace {

struct Fixture {
  worker::Model model;
  std::unique_ptr<worker::Transformer> transformer;
  std::unique_ptr<worker::Tokenizer> tokenizer;
  std::unique_ptr<HaystackCorpus> corpus;
};

Fixture* Load() {
  static Fixture* f = []() -> Fixture* {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr || *path == '\0') return nullptr;
    auto* out = new Fixture;
    auto model = worker::LoadModel(path);
    auto gguf = worker::GgufFile::Open(path);
    if (!model.ok() || !gguf.ok()) return nullptr;
    out->model = *std::move(model);
    auto t = worker::Transformer::Create(out->model, {.num_threads = 1});
    auto tok = worker::TokenizerFromGguf(**gguf);
    if (!t.ok() || !tok.ok()) return nullptr;
    out->transformer = std::make_unique<worker::Transformer>(*std::move(t));
    out->tokenizer = *std::move(tok);
    auto corpus = LoadHaystackCorpus("tom-sawyer", *out->tokenizer);
    if (!corpus.ok()) return nullptr;
    out->corpus = std::make_unique<HaystackCorpus>(*std::move(corpus));
    return out;
  }();
  return f;
}

class EvalRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (scripts/fetch-model)";
    }
    f_ = Load();
    ASSERT_NE(f_, nullptr) << "could not load the model, tokenizer or the tom-sawyer corpus";
  }

  EvalRunOptions Options(const std::vector<std::string>& names, std::vector<int> budgets) {
    EvalRunOptions o;
    for (const std::string& n : names) {
      auto m = ParseMethod(n);
      EXPECT_TRUE(m.ok()) << m.status();
      o.methods.push_back(*m);
    }
    o.budgets = std::move(budgets);
    return o;
  }

  Fixture* f_ = nullptr;
};

TEST_F(EvalRunnerTest, SharedPrefillGivesTheRecordsOfOnePrefillPerMethod) {
  auto examples = GenerateSynthetic(SyntheticTask::kPasskey, *f_->corpus, *f_->tokenizer,
                                    {.prompt_len = 256, .num_examples = 1, .seed = 3});
  ASSERT_TRUE(examples.ok()) << examples.status();
  EvalRunOptions options = Options({"full", "snapkv", "streaming", "h2o", "pyramidkv"}, {48, 96});
  auto shared = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->prefills, 1);
  options.shared_prefill = false;
  auto separate = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(separate.ok()) << separate.status();
  EXPECT_EQ(separate->prefills, 1 + 4 * 2);
  ASSERT_EQ(shared->records.size(), 1u + 4u * 2u);
  ASSERT_EQ(separate->records.size(), shared->records.size());
  std::set<std::pair<std::string, int>> seen;
  for (size_t i = 0; i < shared->records.size(); ++i) {
    const ScoreRecord& a = shared->records[i];
    const ScoreRecord& b = separate->records[i];
    EXPECT_EQ(a.method, b.method);
    EXPECT_EQ(a.budget, b.budget);
    EXPECT_EQ(a.score, b.score);
    EXPECT_EQ(shared->predictions.at({a.method, a.budget}),
              separate->predictions.at({b.method, b.budget}));
    EXPECT_EQ(a.task, "passkey");
    seen.insert({a.method, a.budget});
  }
  EXPECT_EQ(seen.size(), shared->records.size());
  // The full cache finds the pass key in this prompt (the point of the task); its answer is the
  // number itself.
  EXPECT_EQ(shared->records[0].method, "full");
  EXPECT_EQ(shared->records[0].budget, kFullCacheBudget);
  EXPECT_EQ(shared->records[0].score, 1.0) << shared->predictions.at({"full", 0});
}

TEST_F(EvalRunnerTest, FidelityOfTheFullCacheAndOfAnAmpleBudgetIsExact) {
  auto examples = GenerateFidelity(*f_->corpus, *f_->tokenizer,
                                   {.context_len = 200, .continuation_len = 16, .num_examples = 1});
  ASSERT_TRUE(examples.ok()) << examples.status();
  const int n = static_cast<int>((*examples)[0].prompt.size());
  // Budget n keeps every token (no compression); budget 40 compresses.
  EvalRunOptions options = Options({"full", "snapkv", "streaming"}, {40, n});
  auto run = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->records.size(), 3u * (1 + 2 * 2));
  for (const ScoreRecord& r : run->records) {
    SCOPED_TRACE(r.method + "@" + std::to_string(r.budget) + " " + r.task);
    const bool exact = r.method == "full" || r.budget == n;
    if (r.task == kFidelityKlTask) {
      EXPECT_GE(r.score, 0.0);
      if (exact) {
        EXPECT_EQ(r.score, 0.0);
      } else {
        EXPECT_GT(r.score, 0.0);
      }
    } else if (r.task == kFidelityTop1Task) {
      if (exact) {
        EXPECT_EQ(r.score, 1.0);
      }
      EXPECT_LE(r.score, 1.0);
    } else {
      ASSERT_EQ(r.task, kFidelityDeltaNllTask);
      if (exact) {
        EXPECT_EQ(r.score, 0.0);
      }
    }
  }
}

TEST_F(EvalRunnerTest, MapMethodsNeedAMapForEveryBudget) {
  auto examples = GenerateFidelity(*f_->corpus, *f_->tokenizer,
                                   {.context_len = 100, .continuation_len = 4, .num_examples = 1});
  ASSERT_TRUE(examples.ok());
  EvalRunOptions options = Options({"ripple+snapkv"}, {40, 64});
  const int layers = f_->transformer->config().n_layers;
  options.budget_maps[40] = std::vector<int>(layers, 40);
  auto run = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(absl::IsInvalidArgument(run.status()));
  EXPECT_NE(run.status().message().find("64"), std::string_view::npos) << run.status();
  options.budget_maps[64] = std::vector<int>(layers, 64);
  // A uniform map is uniform+snapkv: same scores.
  run = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(run.ok()) << run.status();
  EvalRunOptions uniform = Options({"snapkv"}, {40, 64});
  auto reference = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], uniform);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(run->records.size(), reference->records.size());
  for (size_t i = 0; i < run->records.size(); ++i) {
    EXPECT_EQ(run->records[i].score, reference->records[i].score) << run->records[i].task;
  }
}

TEST_F(EvalRunnerTest, BudgetMapWithBindingBoundsIsEvaluatedExactlyAsGiven) {
  // RippleKV's map from the committed SmolLM2 profile with bounds that bind at both ends, as the
  // scheduler or `ripplekv budgets` makes it: the compression runtime keeps exactly its budgets.
  auto profile = method::ReadProfileFile(RIPPLEKV_SOURCE_DIR "/docs/smollm2_profile.json");
  ASSERT_TRUE(profile.ok()) << profile.status();
  method::BudgetOptions budget{.ratio = 8.0, .average_tokens = 64, .min_tokens = 40};
  budget.max_tokens = 90;
  auto map = method::ComputeBudgetMap(*profile, budget);
  ASSERT_TRUE(map.ok()) << map.status();
  const auto& tokens = map->tokens;
  ASSERT_NE(std::count(tokens.begin(), tokens.end(), 40), 0) << "the lower bound should bind";
  ASSERT_NE(std::count(tokens.begin(), tokens.end(), 90), 0) << "the upper bound should bind";
  auto examples = GenerateFidelity(*f_->corpus, *f_->tokenizer,
                                   {.context_len = 160, .continuation_len = 4, .num_examples = 1});
  ASSERT_TRUE(examples.ok()) << examples.status();
  EvalRunOptions options = Options({"ripple+snapkv", "ripple+h2o"}, {64});
  options.budget_maps[64].assign(tokens.begin(), tokens.end());
  auto run = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<int> expected(tokens.begin(), tokens.end());
  EXPECT_EQ(run->kept.at({"ripple+snapkv", 64}), expected);
  EXPECT_EQ(run->kept.at({"ripple+h2o", 64}), expected);
}

TEST_F(EvalRunnerTest, VariantsRunWithTheirOwnSettingsFromTheSamePrefill) {
  auto examples = GenerateFidelity(*f_->corpus, *f_->tokenizer,
                                   {.context_len = 120, .continuation_len = 4, .num_examples = 1});
  ASSERT_TRUE(examples.ok()) << examples.status();
  const int layers = f_->transformer->config().n_layers;
  std::vector<int> skewed(layers, 40);
  skewed[0] = 32;  // at the SnapKV window, the selection minimum
  skewed[1] = 48;
  EvalRunOptions options = Options({"snapkv", "cake"}, {40, 64});
  options.budget_maps[40] = std::vector<int>(layers, 40);
  options.budget_maps[64] = std::vector<int>(layers, 64);
  CompressOptions hot = options.compress;
  hot.cake_tau1 = 0.5;
  hot.cake_tau2 = 2.0;
  options.variants.push_back({.label = "ripple@skewed",
                              .method = *ParseMethod("ripple+snapkv"),
                              .budget_maps = {{40, skewed}},
                              .budgets = {40}});
  options.variants.push_back(
      {.label = "cake@hot", .method = *ParseMethod("cake"), .compress = hot});
  auto run = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->prefills, 1);
  EXPECT_EQ(run->kept.at({"ripple@skewed", 40}), skewed);
  EXPECT_FALSE(run->kept.contains({"ripple@skewed", 64}));  // its own budgets only

  // The CAKE variant scores what a run with those temperatures gives.
  EvalRunOptions direct = Options({"cake"}, {40, 64});
  direct.compress = hot;
  auto reference = EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], direct);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<double> variant_scores, reference_scores;
  for (const ScoreRecord& r : run->records) {
    if (r.method == "cake@hot") variant_scores.push_back(r.score);
  }
  for (const ScoreRecord& r : reference->records) reference_scores.push_back(r.score);
  EXPECT_EQ(variant_scores, reference_scores);
  EXPECT_EQ(run->kept.at({"cake@hot", 64}), reference->kept.at({"cake", 64}));

  // Labels are unique, and a variant keeps the prefill's window.
  options.variants.push_back({.label = "snapkv", .method = *ParseMethod("h2o")});
  EXPECT_TRUE(absl::IsInvalidArgument(
      EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options).status()));
  options.variants.pop_back();
  hot.window = 16;
  options.variants.push_back(
      {.label = "cake@w16", .method = *ParseMethod("cake"), .compress = hot});
  EXPECT_TRUE(absl::IsInvalidArgument(
      EvaluateExample(*f_->transformer, *f_->tokenizer, (*examples)[0], options).status()));
}

}  // namespace
}  // namespace ripplekv::eval
