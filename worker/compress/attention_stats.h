#pragma once
// Attention statistics of one layer over a prompt, the inputs of the compression policies
// (docs/COMPRESSION.md). They are computed from the layer's queries and its cached keys, one
// query row at a time, so nothing of size n x n is ever stored: memory is O(n) per head.
//
//   window statistics (SnapKV, CAKE): for each query head h and each of the last w' = min(w, n)
//     prompt queries i (the observation window), the causal softmax attention
//     a[h, i, j] = softmax_j(scale * q_i . k_j) over the keys j the query can see; kept as sums
//     over the window queries (sum of a, sum of a^2) per (h, j), plus CAKE's spatial dispersion
//     (the entropy of the window's attention to the prefix keys, j < n - w').
//   accumulated attention (H2O): for each KV head, the attention of ALL prompt queries to key j,
//     summed over the queries and over the query heads of the KV head's group.
//
// Keys are indexed by cache entry (0 .. n-1), which is what KvCache::Retain takes. The sums are
// the kernels ops of kernels/ops/attention_stats.h (in double; results do not depend on the
// thread count); this header gathers them into LayerStats for the policies.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::worker {

// CAKE's entropy offset: -sum a log(a + kEntropyEpsilon) (the reference implementation's 1e-10).
inline constexpr double kEntropyEpsilon = 1e-10;

struct LayerStats {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // KV heads; query head h reads KV head h / (n_heads / n_kv_heads)
  int length = 0;      // n: cached prompt tokens of the layer
  int window = 0;      // w' = min(w, n): observed window queries; 0 when not computed
  // [n_heads, length]: sum over the window queries of a[h, i, j] (0 where no window query sees j).
  std::vector<double> window_sum;
  // [n_heads, length]: sum over the window queries of a[h, i, j]^2.
  std::vector<double> window_sumsq;
  // CAKE's spatial dispersion H_l: sum over heads, window queries and prefix keys j < n - w' of
  // -a log(a + kEntropyEpsilon), nats.
  double window_entropy = 0.0;
  // [n_kv_heads, length]: H2O accumulated attention; empty when not computed.
  std::vector<double> accumulated;

  int prefix_end() const { return length - window; }  // first window position
  bool has_window() const { return window > 0; }
  bool has_accumulated() const { return !accumulated.empty(); }
};

// Computes the window statistics of `stats` (resizing window_sum / window_sumsq, resetting
// window_entropy) from q: [w, n_heads, head_dim], the queries of the last w entries of `keys`
// (their positions are keys.positions of those entries), scale usually 1/sqrt(head_dim).
// `keys` is one layer's cache (values are not read); its entries must be the same tokens in every
// head (an uncompressed cache). Sets stats.n_heads, n_kv_heads, length and window = w.
// InvalidArgument on shape mismatch, w == 0 or w > keys.length. q and keys live on ctx's device.
[[nodiscard]] Status ComputeWindowStats(const kernels::ConstTensorView& q,
                                        const kernels::KvCacheView& keys, double scale,
                                        const kernels::OpContext& ctx, LayerStats& stats);

// Computes stats.accumulated from q: [n, n_heads, head_dim], the queries of all n entries of
// `keys` (causal: query i sees the keys at positions <= its own). Costs O(n^2 * n_heads *
// head_dim) time and O(n) memory per head. Sets n_heads, n_kv_heads and length.
// InvalidArgument on shape mismatch (q rows must equal keys.length). q and keys live on ctx's
// device.
[[nodiscard]] Status ComputeAccumulatedAttention(const kernels::ConstTensorView& q,
                                                 const kernels::KvCacheView& keys, double scale,
                                                 const kernels::OpContext& ctx, LayerStats& stats);

// Checks that the statistics are self-consistent (heads divide, window <= length, array sizes
// match); InvalidArgument describing the first mismatch. Selections and allocations call it before
// reading the arrays, so hand-made or corrupted statistics cannot index out of range.
[[nodiscard]] Status CheckLayerStats(const LayerStats& stats);

// CAKE's temporal shift V_l: the variance over the window queries (unbiased, divisor w' - 1, as
// torch.var) of a[h, i, j], summed over heads and prefix keys j < n - w'. 0 when w' < 2.
double TemporalShift(const LayerStats& stats);

}  // namespace ripplekv::worker
