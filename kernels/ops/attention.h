#pragma once
// Causal grouped-query attention of new queries against a layer's key/value cache.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// One layer's cache as the kernel reads it. Every KV head holds `length` entries (heads of one
// layer share a length, not necessarily the same tokens), in increasing position order.
struct KvCacheView {
  const float* k = nullptr;          // [n_kv_heads, capacity, head_dim], RoPE already applied
  const float* v = nullptr;          // [n_kv_heads, capacity, head_dim]
  const int32_t* positions = nullptr;  // [n_kv_heads, capacity]: original token positions
  int n_kv_heads = 0;
  int capacity = 0;
  int length = 0;
  int head_dim = 0;
  Device device = Device::kCpu;  // where k, v and positions live
};

// q: [M, n_heads, head_dim] (RoPE applied), q_positions: [M]. out: [M, n_heads, head_dim].
// Query head h reads KV head h / (n_heads / n_kv_heads) (no repeated KV copies). Key j is visible
// to query i iff positions[j] <= q_positions[i]; a query with no visible key gets zeros.
// scale: usually 1/sqrt(head_dim). Results do not depend on the thread count.
[[nodiscard]] Status CausalAttention(const OpContext& ctx, const ConstTensorView& q,
                                     Int32View q_positions, const KvCacheView& cache,
                                     float scale, const TensorView& out);

// Same, over the union of several caches ("segments"): the keys a query sees are those of every
// segment, with one softmax across all of them. Calibration uses it to attend a probe to a shared
// context segment plus the probe's own keys without copying the context per trial. Segments
// must agree on n_kv_heads and head_dim; each is position-sorted on its own.
[[nodiscard]] Status CausalAttention(const OpContext& ctx, const ConstTensorView& q,
                                     Int32View q_positions,
                                     std::span<const KvCacheView> segments, float scale,
                                     const TensorView& out);

}  // namespace ripplekv::kernels
