#pragma once
// The CPU backend of the KV-cache writes (kernels/ops/kv_cache.h), called only by the front end
// after its checks (no re-validation).

#include <cstdint>

#include "kernels/ops/kv_cache.h"

namespace ripplekv::kernels::cpu {

void KvAppend(const float* k_rows, const float* v_rows, const int32_t* positions, int64_t n,
              const KvLayerRef& layer);
void KvRetain(const int32_t* keep, int count, const KvLayerRef& layer);

}  // namespace ripplekv::kernels::cpu
