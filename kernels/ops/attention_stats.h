#pragma once
// Attention statistics of one layer over a prompt, the inputs of the KV-cache compression
// policies (SnapKV, CAKE, H2O; docs/COMPRESSION.md). Computed from the layer's queries and its
// cached keys one query row at a time, in double, so nothing of size n x n is stored (memory O(n)
// per head); results do not depend on the thread count.
//
// For query head h (reading KV head h / (n_heads / n_kv_heads)) and a query at position p,
// a[h, p, j] = softmax_j(scale * q . k_j) over the cache entries j at positions <= p (entries are
// in increasing position order, the same tokens in every head: an uncompressed cache).
// q and the keys live on the context's device; the outputs (sum, sumsq, *entropy, accumulated)
// are host memory on every device.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// Window statistics. q: [w, n_heads, head_dim], the queries of the last w entries of `keys`
// (1 <= w <= keys.length = n). Writes, for every head h and entry j (0 where no window query sees
// j): sum[h * n + j] = sum over the window queries of a, sumsq[h * n + j] = the same of a^2; and
// *entropy = sum over heads, window queries and prefix entries j < n - w of
// -a log(a + entropy_epsilon) (CAKE's spatial dispersion, nats). sum and sumsq: n_heads * n values.
// InvalidArgument naming the mismatch (nothing written).
[[nodiscard]] Status WindowAttentionStats(const OpContext& ctx, const ConstTensorView& q,
                                          const KvCacheView& keys, double scale,
                                          double entropy_epsilon, std::span<double> sum,
                                          std::span<double> sumsq, double* entropy);

// H2O's accumulated attention. q: [n, n_heads, head_dim], the queries of all n entries of `keys`.
// Writes accumulated[g * n + j] = the sum over every query and every query head of KV group g of
// a (per head first, then over the group in head order). accumulated: n_kv_heads * n values.
// Costs O(n^2 * n_heads * head_dim). InvalidArgument naming the mismatch (nothing written).
[[nodiscard]] Status AccumulatedAttention(const OpContext& ctx, const ConstTensorView& q,
                                          const KvCacheView& keys, double scale,
                                          std::span<double> accumulated);

}  // namespace ripplekv::kernels
