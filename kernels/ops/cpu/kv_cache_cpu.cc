// KV-cache writes on the host: one memcpy per head and token.

#include <cstring>

#include "kernels/ops/cpu/kv_cache_cpu.h"

namespace ripplekv::kernels::cpu {

void KvAppend(const float* k_rows, const float* v_rows, const int32_t* positions, int64_t n,
              const KvLayerRef& layer) {
  const int64_t d = layer.head_dim;
  const int64_t row = static_cast<int64_t>(layer.n_kv_heads) * d;
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
    const int64_t base = h * layer.capacity + layer.length;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(layer.k + (base + i) * d, k_rows + i * row + h * d, d * sizeof(float));
      std::memcpy(layer.v + (base + i) * d, v_rows + i * row + h * d, d * sizeof(float));
      layer.positions[base + i] = positions[i];
    }
  }
}

void KvRetain(const int32_t* keep, int count, const KvLayerRef& layer) {
  const int64_t d = layer.head_dim;
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
    const int64_t base = h * layer.capacity;
    const int32_t* idx = keep + h * count;
    for (int64_t j = 0; j < count; ++j) {
      const int64_t src = base + idx[j];  // idx[j] >= j: moving forward never overwrites unread
      std::memmove(layer.k + (base + j) * d, layer.k + src * d, d * sizeof(float));
      std::memmove(layer.v + (base + j) * d, layer.v + src * d, d * sizeof(float));
      layer.positions[base + j] = layer.positions[src];
    }
  }
}

}  // namespace ripplekv::kernels::cpu
