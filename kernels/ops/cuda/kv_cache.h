#pragma once
// The CUDA launchers of the KV-cache writes for its front end (kernels/ops/kv_cache.h), with the
// front end's contract; every pointer (int32 ones too) is device memory unless named host_*.
// Launchers queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not
// compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// One cache layer's device memory (KvLayerRef's fields; this header stays free of Abseil, which
// nvcc does not compile).
struct CacheLayer {
  float* k;
  float* v;
  int32_t* positions;
  int n_kv_heads, capacity, length, head_dim;
};
[[nodiscard]] int KvAppend(const OpContext& ctx, const float* k_rows, const float* v_rows,
              const int32_t* positions, int64_t n, const CacheLayer& layer);
[[nodiscard]] int KvRetain(const OpContext& ctx, const int32_t* keep, int count, const CacheLayer& layer);

}  // namespace ripplekv::kernels::cuda
