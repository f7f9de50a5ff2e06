#include "worker/engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

TEST(PerplexityTest, ScoresSecondHalfOfEachChunkLikeLlamaCpp) {
  const Model m = testing::MakeTinyModel();
  auto t = Transformer::Create(m, {});
  ASSERT_TRUE(t.ok());
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(45);  // 2 full chunks of 16 and a dropped tail of 13
  for (auto& v : tokens) v = rng() % m.config.vocab_size;
  const int32_t bos = 0;
  auto r = ComputePerplexity(*t, tokens, {.n_ctx = 16, .bos_id = bos});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n_chunks, 2);
  EXPECT_EQ(r->tokens_scored, 2 * (16 - 1 - 8));

  double total = 0;
  for (int c = 0; c < 2; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + 16 * c, tokens.begin() + 16 * (c + 1));
    chunk[0] = bos;
    const auto logits = testing::NaiveForward(m, chunk);
    double chunk_sum = 0;
    for (int i = 8; i < 15; ++i) {
      double mx = -1e300, z = 0;
      for (double v : logits[i]) mx = std::max(mx, v);
      for (double v : logits[i]) z += std::exp(v - mx);
      chunk_sum += mx + std::log(z) - logits[i][tokens[16 * c + i + 1]];
    }
    EXPECT_NEAR(r->chunk_nll_sum[c], chunk_sum, 1e-3) << "chunk " << c;
    total += chunk_sum;
  }
  EXPECT_NEAR(r->ppl, std::exp(total / 14), 1e-3 * r->ppl);
}

TEST(PerplexityTest, NeedsTwoContextsOfTokens) {
  const Model m = testing::MakeTinyModel();
  auto t = Transformer::Create(m, {});
  ASSERT_TRUE(t.ok());
  std::vector<int32_t> tokens(31, 1);
  auto r = ComputePerplexity(*t, tokens, {.n_ctx = 16});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
