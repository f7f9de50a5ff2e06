// The tensor-parallel split (worker/model/model_shard.h): which heads, hidden units and vocabulary
// each rank holds for real shapes, and that a shard's weights are the whole model's slices.

#include "worker/model/model_shard.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

ModelConfig Shape(int n_heads, int n_kv_heads, int d_ff, int vocab) {
  ModelConfig c;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = 64;
  c.d_ff = d_ff;
  c.vocab_size = vocab;
  return c;
}

// Every query head exactly once, each rank's heads reading only its KV heads at the model's
// group ratio, hidden units and vocabulary covered exactly once.
void ExpectAPartition(const ModelConfig& c, int size) {
  const int group = c.n_heads / c.n_kv_heads;
  int next_head = 0, next_ff = 0, next_vocab = 0;
  for (int r = 0; r < size; ++r) {
    auto p = PlanShard(c, r, size);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->first_head, next_head) << "rank " << r;
    EXPECT_GE(p->n_heads, 1);
    next_head += p->n_heads;
    for (int h = p->first_head; h < p->first_head + p->n_heads; ++h) {
      const int kv = h / group;
      EXPECT_GE(kv, p->first_kv_head);
      EXPECT_LT(kv, p->first_kv_head + p->n_kv_heads);
      // The local GQA mapping of the attention kernels: local head / local ratio.
      const int local_ratio = p->n_heads / p->n_kv_heads;
      EXPECT_EQ((h - p->first_head) / local_ratio, kv - p->first_kv_head) << "head " << h;
    }
    EXPECT_EQ(p->first_ff, next_ff);
    next_ff += p->n_ff;
    EXPECT_EQ(p->first_vocab, next_vocab);
    next_vocab += p->n_vocab;
  }
  EXPECT_EQ(next_head, c.n_heads);
  EXPECT_EQ(next_ff, c.d_ff);
  EXPECT_EQ(next_vocab, c.vocab_size);
}

TEST(ModelShardTest, PlansPartitionRealShapes) {
  const ModelConfig smollm2 = Shape(9, 3, 1536, 49152), llama3_8b = Shape(32, 8, 14336, 128256);
  for (int size : {1, 2, 3, 4, 9}) ExpectAPartition(smollm2, size);
  for (int size : {1, 2, 4, 8, 16, 32}) ExpectAPartition(llama3_8b, size);
  // SmolLM2 on 2 ranks: whole KV groups, rank 1 two of them.
  auto r0 = PlanShard(smollm2, 0, 2), r1 = PlanShard(smollm2, 1, 2);
  EXPECT_EQ(r0->n_kv_heads, 1);
  EXPECT_EQ(r0->n_heads, 3);
  EXPECT_EQ(r1->first_kv_head, 1);
  EXPECT_EQ(r1->n_heads, 6);
  EXPECT_EQ(r0->n_ff, 768);  // whole 256-value blocks
  EXPECT_EQ(PlanShard(smollm2, 0, 9)->n_ff % 32, 0);  // 9 ranks: 32-value blocks
  // On 4 ranks the third KV head is replicated on ranks 2 and 3.
  auto r2 = PlanShard(smollm2, 2, 4), r3 = PlanShard(smollm2, 3, 4);
  EXPECT_EQ(r2->first_kv_head, 2);
  EXPECT_EQ(r3->first_kv_head, 2);
  EXPECT_EQ(r2->n_heads + r3->n_heads, 3);
}

TEST(ModelShardTest, RejectsImpossibleSplits) {
  const ModelConfig c = Shape(4, 2, 64, 100);
  EXPECT_EQ(PlanShard(c, 0, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanShard(c, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanShard(c, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelShardTest, AShardHoldsTheWholeModelsSlices) {
  const Model full = testing::MakeTinyModel({.n_heads = 4, .n_kv_heads = 2, .qkv_bias = true});
  auto shard = ShardModel(full, 1, 2);
  ASSERT_TRUE(shard.ok()) << shard.status();
  const ModelConfig& c = shard->config;
  const int64_t hd = full.config.head_dim, d = full.config.d_model;
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(shard->shard.first_head, 2);
  EXPECT_EQ(shard->shard.vocab_size, full.config.vocab_size);
  const LayerWeights& f = full.layers[1];
  const LayerWeights& s = shard->layers[1];
  const kernels::Tensor wq = f.wq.Expand(), wo = f.wo.Expand(), sq = s.wq.Expand(),
                        so = s.wo.Expand();
  for (int64_t r = 0; r < 2 * hd; ++r) {
    for (int64_t k = 0; k < d; ++k) EXPECT_EQ(sq.data()[r * d + k], wq.data()[(2 * hd + r) * d + k]);
  }
  for (int64_t r = 0; r < d; ++r) {
    for (int64_t k = 0; k < 2 * hd; ++k) {
      EXPECT_EQ(so.data()[r * 2 * hd + k], wo.data()[r * 4 * hd + 2 * hd + k]);
    }
  }
  EXPECT_EQ(s.bk.numel(), hd);
  EXPECT_EQ(s.bk.data()[0], f.bk.data()[hd]);
  // The LM head slice of tied embeddings.
  const kernels::Tensor head = shard->output.Expand(), emb = full.tok_embeddings.Expand();
  EXPECT_EQ(head.dim(0), c.vocab_size);
  EXPECT_EQ(head.data()[0], emb.data()[shard->shard.first_vocab * d]);
}

}  // namespace
}  // namespace ripplekv::worker
