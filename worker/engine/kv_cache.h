#pragma once
// The key/value cache of one sequence: per layer and per KV head, the RoPE'd keys, the values and
// the original position of every cached token.
//
// Invariants: within a layer every KV head holds the same number of entries (`length(layer)`), and
// each head's entries are in increasing position order (the attention kernel relies on it).
// Heads may hold different tokens after compression (per-head selection). Later issues read,
// perturb and shrink entries through the accessors below; positions never change when entries
// are dropped, so RoPE stays correct. Not thread-safe for concurrent mutation.
//
// A cache lives on the host or on a device (a DeviceSession's); on a device the keys, values and
// positions are device tensors and a host copy of the positions answers Position() and the order
// checks, so only Key()/Value() (host spans) are host-only.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/kv_cache.h"
#include "kernels/ops/op_context.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

class KvCache {
 public:
  // Room for `capacity` tokens per layer and head. Memory: 2 * L * H_kv * capacity * d * 4 bytes,
  // on `device`'s device (the host when null; the session must outlive the cache).
  KvCache(const ModelConfig& config, int capacity, const kernels::DeviceSession* device = nullptr);

  // Where the cache's memory lives and its writes run.
  const kernels::OpContext& op_context() const { return ctx_; }

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int capacity() const { return capacity_; }
  int length(int layer) const { return layers_[layer].length; }

  // Empties every layer (keeps the memory).
  void Clear();

  // Appends n tokens to `layer`. k_rows, v_rows: [n, n_kv_heads, head_dim] (the projection
  // layout); positions: [n], each greater than every position already cached in the layer.
  // ResourceExhausted when the layer would exceed capacity; InvalidArgument on position order.
  // k_rows and v_rows live on the cache's device, positions on the host.
  [[nodiscard]] Status Append(int layer, const kernels::ConstTensorView& k_rows,
                              const kernels::ConstTensorView& v_rows,
                              std::span<const int32_t> positions);
  // The same for host rows given as flat spans ([n * n_kv_heads * head_dim] each).
  [[nodiscard]] Status Append(int layer, std::span<const float> k_rows,
                              std::span<const float> v_rows, std::span<const int32_t> positions);

  // Entry i of one head: [head_dim] floats, mutable so callers can perturb values in place.
  // Host caches only (CHECK-fails on a device cache).
  std::span<float> Key(int layer, int head, int i);
  std::span<float> Value(int layer, int head, int i);
  std::span<const float> Key(int layer, int head, int i) const;
  std::span<const float> Value(int layer, int head, int i) const;
  int32_t Position(int layer, int head, int i) const;
  // The first `count` value vectors of one head, [count, head_dim], as a view on the cache's
  // device (callers perturb them in place with device ops).
  kernels::TensorView Values(int layer, int head, int count);

  // Keeps, for every head of `layer`, the entries whose indices are listed (strictly increasing,
  // same count for every head): keep[h] are indices into head h's current entries.
  [[nodiscard]] Status Retain(int layer, std::span<const std::vector<int32_t>> keep);

  // Drops entries at positions >= `position` in every layer (rewinds a sequence).
  void TruncateFrom(int32_t position);

  kernels::KvCacheView View(int layer) const;

 private:
  struct Layer {
    kernels::Tensor k;          // [n_kv_heads, capacity, head_dim]
    kernels::Tensor v;          // [n_kv_heads, capacity, head_dim]
    kernels::Tensor positions;  // [n_kv_heads, capacity], int32
    // On a device cache, the host copy of `positions` (empty on a host cache).
    kernels::Tensor host_positions;
    int length = 0;

    Layer() = default;
    Layer(Layer&&) noexcept = default;
    Layer& operator=(Layer&&) noexcept = default;
    // A cache copies deeply (the evaluation compresses copies of one prefilled cache).
    Layer(const Layer& other)
        : k(other.k.Clone()),
          v(other.v.Clone()),
          positions(other.positions.Clone()),
          host_positions(other.host_positions.Clone()),
          length(other.length) {}
    Layer& operator=(const Layer& other) {
      if (this != &other) *this = Layer(other);
      return *this;
    }
  };
  size_t Offset(int head, int i) const {
    return (static_cast<size_t>(head) * capacity_ + i) * head_dim_;
  }
  kernels::KvLayerRef Ref(int layer);
  // The host-readable positions of `layer` ([n_kv_heads, capacity]).
  int32_t* HostPositions(int layer);
  const int32_t* HostPositions(int layer) const;

  // Immutable after construction.
  kernels::OpContext ctx_;  // where the cache's memory lives and its writes run
  kernels::Allocator* allocator_;
  int n_layers_;
  int n_kv_heads_;
  int head_dim_;
  int capacity_;
  std::vector<Layer> layers_;
};

}  // namespace ripplekv::worker
