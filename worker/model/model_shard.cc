#include "worker/model/model_shard.h"

#include <algorithm>
#include <span>

#include "base/strings.h"

namespace ripplekv::worker {

namespace {

// [begin, end) of part `i` of `count` items split into `parts` runs as even as possible, in units
// of `grain` items (count a multiple of grain).
std::pair<int, int> EvenRun(int count, int parts, int i, int grain = 1) {
  const int units = count / grain;
  return {static_cast<int>(static_cast<int64_t>(i) * units / parts) * grain,
          static_cast<int>(static_cast<int64_t>(i + 1) * units / parts) * grain};
}

// Elements [first, first + n) of a host fp32 vector (empty stays empty).
kernels::Tensor Slice(const kernels::Tensor& t, int64_t first, int64_t n) {
  if (t.empty()) return kernels::Tensor();
  return kernels::Tensor({n}, t.span().subspan(static_cast<size_t>(first), static_cast<size_t>(n)));
}

kernels::Tensor Copy(const kernels::Tensor& t) { return t.empty() ? kernels::Tensor() : t.Clone(); }

}  // namespace

StatusOr<ShardPlan> PlanShard(const ModelConfig& c, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(Cat("rank ", rank, " of ", size, " ranks"));
  }
  if (size > c.n_heads) {
    return absl::InvalidArgumentError(
        Cat(size, " tensor-parallel ranks for ", c.n_heads, " query heads"));
  }
  const int group = c.n_heads / c.n_kv_heads;
  ShardPlan p;
  if (size <= c.n_kv_heads) {
    const auto [kv0, kv1] = EvenRun(c.n_kv_heads, size, rank);
    p.first_kv_head = kv0;
    p.n_kv_heads = kv1 - kv0;
    p.first_head = kv0 * group;
    p.n_heads = (kv1 - kv0) * group;
  } else {
    // Ranks spread over the KV heads as evenly as possible; each KV head's query heads split among
    // its ranks.
    int kv = 0;
    while (EvenRun(size, c.n_kv_heads, kv).second <= rank) ++kv;
    const auto [r0, r1] = EvenRun(size, c.n_kv_heads, kv);
    if (r1 - r0 > group) {
      return absl::InvalidArgumentError(Cat(r1 - r0, " ranks share KV head ", kv, ", which has ",
                                            group, " query heads"));
    }
    const auto [h0, h1] = EvenRun(group, r1 - r0, rank - r0);
    p.first_kv_head = kv;
    p.n_kv_heads = 1;
    p.first_head = kv * group + h0;
    p.n_heads = h1 - h0;
  }
  // Hidden units in whole 256-value blocks where the width and the rank count allow (then the
  // row-parallel columns stay in the stored type for every block size), else 32-value ones.
  int grain = 1;
  for (const int g : {256, 32}) {
    if (c.d_ff % g == 0 && c.d_ff / g >= size) {
      grain = g;
      break;
    }
  }
  const auto [f0, f1] = EvenRun(c.d_ff, size, rank, grain);
  p.first_ff = f0;
  p.n_ff = f1 - f0;
  const auto [v0, v1] = EvenRun(c.vocab_size, size, rank);
  p.first_vocab = v0;
  p.n_vocab = v1 - v0;
  if (p.n_ff < 1 || p.n_vocab < 1) {
    return absl::InvalidArgumentError(Cat(size, " ranks leave rank ", rank, " no hidden units (",
                                          c.d_ff, ") or no vocabulary (", c.vocab_size, ")"));
  }
  return p;
}

StatusOr<Model> ShardModel(const Model& full, int rank, int size) {
  const ModelConfig& c = full.config;
  ASSIGN_OR_RETURN(const ShardPlan p, PlanShard(c, rank, size));
  const int64_t hd = c.head_dim;
  const int64_t q0 = p.first_head * hd, qn = p.n_heads * hd;
  const int64_t kv0 = p.first_kv_head * hd, kvn = p.n_kv_heads * hd;
  Model m;
  m.config = c;
  m.config.n_heads = p.n_heads;
  m.config.n_kv_heads = p.n_kv_heads;
  m.config.d_ff = p.n_ff;
  m.config.vocab_size = p.n_vocab;
  m.config.tied_embeddings = false;
  m.shard = {.rank = rank,
             .size = size,
             .first_head = p.first_head,
             .first_kv_head = p.first_kv_head,
             .first_ff = p.first_ff,
             .first_vocab = p.first_vocab,
             .vocab_size = c.vocab_size};
  ASSIGN_OR_RETURN(m.tok_embeddings, full.tok_embeddings.Rows(0, full.tok_embeddings.rows()));
  ASSIGN_OR_RETURN(m.output, full.lm_head().Rows(p.first_vocab, p.n_vocab));
  m.output_norm = Copy(full.output_norm);
  m.rope_freq_factors = Copy(full.rope_freq_factors);
  m.layers.resize(full.layers.size());
  for (size_t l = 0; l < full.layers.size(); ++l) {
    const LayerWeights& f = full.layers[l];
    LayerWeights& s = m.layers[l];
    s.attn_norm = Copy(f.attn_norm);
    s.ffn_norm = Copy(f.ffn_norm);
    ASSIGN_OR_RETURN(s.wq, f.wq.Rows(q0, qn));
    ASSIGN_OR_RETURN(s.wk, f.wk.Rows(kv0, kvn));
    ASSIGN_OR_RETURN(s.wv, f.wv.Rows(kv0, kvn));
    ASSIGN_OR_RETURN(s.wo, f.wo.Columns(q0, qn));
    s.bq = Slice(f.bq, q0, qn);
    s.bk = Slice(f.bk, kv0, kvn);
    s.bv = Slice(f.bv, kv0, kvn);
    ASSIGN_OR_RETURN(s.w_gate, f.w_gate.Rows(p.first_ff, p.n_ff));
    ASSIGN_OR_RETURN(s.w_up, f.w_up.Rows(p.first_ff, p.n_ff));
    ASSIGN_OR_RETURN(s.w_down, f.w_down.Columns(p.first_ff, p.n_ff));
  }
  return m;
}

}  // namespace ripplekv::worker
