#pragma once
// Megatron-style tensor parallelism (docs/DESIGN.md §3.2): which heads, hidden units and
// vocabulary slice each of N ranks holds, and the shard of a loaded model.
//
// The split:
//   * Query heads go with their KV group, so every rank's heads read its own KV heads at one
//     uniform group ratio. With N <= n_kv_heads the KV heads are split into contiguous runs as
//     even as possible (runs differ by one head; with SmolLM2's 3 KV heads on 2 ranks, rank 0
//     holds KV head 0 and query heads 0-2, rank 1 KV heads 1-2 and query heads 3-8). With
//     N > n_kv_heads each rank holds one KV head, replicated on the ranks that share it, and a
//     contiguous run of that head's query heads (N <= n_heads required).
//   * Q, K, V (and their biases) and gate/up are column-parallel: a rank holds the rows of its
//     heads / hidden units (shared with the file's mapping, no copy). Attention output and down
//     are row-parallel: a rank holds the columns of its heads / hidden units, copied compactly in
//     the stored type when the cut falls on block boundaries (else as fp32). Each is followed by
//     one all-reduce before the residual add.
//   * The LM head is vocabulary-parallel: a rank holds a contiguous slice of the vocabulary
//     (slices differ by at most one token); log-sum-exp and KL combine per-rank partial sums.
//   * Token embeddings, norms and RoPE factors are replicated (the embedding table stays mapped,
//     so a rank pages in only the rows of the tokens it sees).

#include "base/status.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

struct ShardPlan {
  int first_head = 0, n_heads = 0;
  int first_kv_head = 0, n_kv_heads = 0;
  int first_ff = 0, n_ff = 0;
  int first_vocab = 0, n_vocab = 0;
};

// Rank `rank`'s part of a model of `config` split over `size` ranks. InvalidArgument when
// size < 1, rank outside [0, size), more ranks than query heads, or a KV head with more ranks than
// query heads.
[[nodiscard]] StatusOr<ShardPlan> PlanShard(const ModelConfig& config, int rank, int size);

// The shard of `full` (a whole model, host weights) for rank `rank` of `size`: its config holds
// the shard's sizes (untied: the shard's LM head is its vocabulary slice), `shard` places it.
// Stored row slices share the full model's mapping, which must outlive the shard. Row-parallel
// column copies read every row of their matrices through the mapping: call
// full.release_mapped_pages afterwards (when set) so the rank keeps only its own slices resident.
[[nodiscard]] StatusOr<Model> ShardModel(const Model& full, int rank, int size);

}  // namespace ripplekv::worker
