#pragma once
// The writes of a KV cache: appending a batch's keys and values, and compacting each head to the
// entries a compression policy keeps. The cache layout is KvCacheView's (attention.h): per layer,
// [n_kv_heads, capacity, head_dim] keys and values and [n_kv_heads, capacity] positions. The
// owner of the cache (worker/engine/kv_cache.h) keeps the lengths and the position order; these
// ops move the bytes, on the cache's device.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// A mutable view of one layer's cache, `length` entries per head in use.
struct KvLayerRef {
  float* k = nullptr;
  float* v = nullptr;
  int32_t* positions = nullptr;
  int n_kv_heads = 0;
  int capacity = 0;
  int length = 0;
  int head_dim = 0;
  Device device = Device::kCpu;
};

// Writes the n rows of k_rows and v_rows ([n, n_kv_heads * head_dim], the projection layout: row i
// holds every head's vector of token i) and `positions` ([n]) into entries
// [layer.length, layer.length + n) of every head. The caller then advances its length by n.
// InvalidArgument naming the tensor on a shape mismatch; ResourceExhausted when the entries
// do not fit the capacity (nothing written).
[[nodiscard]] Status KvAppend(const OpContext& ctx, const ConstTensorView& k_rows,
                              const ConstTensorView& v_rows, Int32View positions,
                              const KvLayerRef& layer);

// Compacts every head h to the entries keep[h * count + j], j in [0, count), which must be
// strictly increasing in [0, layer.length): entry j becomes the old entry keep[h * count + j]
// (key, value and position). The caller then sets its length to count. InvalidArgument naming
// the head and entry of a bad index, or a keep of the wrong size (nothing moved); on a device,
// where keep lives in device memory, the indices are not checked (the caller's contract).
[[nodiscard]] Status KvRetain(const OpContext& ctx, Int32View keep, int count,
                              const KvLayerRef& layer);

}  // namespace ripplekv::kernels
