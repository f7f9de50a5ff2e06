#include "worker/engine/sampler.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/worker/engine/tiny_model.h"
#include "worker/engine/generator.h"

namespace ripplekv::worker {
namespace {

TEST(SamplerTest, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s({});
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, TopKOneIsGreedyAtAnyTemperature) {
  Sampler s({.temperature = 5.0f, .top_k = 1, .seed = 9});
  const std::vector<float> logits = {0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, SameSeedSameSequenceAndFollowsTheDistribution) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  Sampler a({.temperature = 1.0f, .seed = 5}), b({.temperature = 1.0f, .seed = 5});
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t x = a.Sample(logits);
    EXPECT_EQ(x, b.Sample(logits));
    ones += x;
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(GeneratorTest, GreedyGenerationMatchesArgmaxOfFullForward) {
  const Model m = testing::MakeTinyModel();
  auto t = Transformer::Create(m, {});
  ASSERT_TRUE(t.ok());
  std::vector<int32_t> seq = {3, 1, 4, 1, 5};
  auto r = Generate(*t, seq, {.max_new_tokens = 6});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tokens.size(), 6u);
  for (int32_t tok : r->tokens) {
    const auto logits = testing::NaiveForward(m, seq);
    const auto& last = logits.back();
    EXPECT_EQ(tok, std::max_element(last.begin(), last.end()) - last.begin());
    seq.push_back(tok);
  }
}

TEST(GeneratorTest, StopsAtStopTokenWithoutEmittingIt) {
  const Model m = testing::MakeTinyModel();
  auto t = Transformer::Create(m, {});
  ASSERT_TRUE(t.ok());
  const std::vector<int32_t> prompt = {3, 1, 4};
  auto free_run = Generate(*t, prompt, {.max_new_tokens = 3});
  ASSERT_TRUE(free_run.ok());
  const int32_t stop = free_run->tokens[1];
  auto r = Generate(*t, prompt, {.max_new_tokens = 3, .is_stop = [&](int32_t id) { return id == stop; }});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->tokens.size(), free_run->tokens[0] == stop ? 0u : 1u);
}

}  // namespace
}  // namespace ripplekv::worker
