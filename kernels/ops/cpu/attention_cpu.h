#pragma once
// The CPU backend of causal attention (kernels/ops/attention.h), called only by the front end
// after its checks (no re-validation).

#include <cstdint>
#include <span>

#include "kernels/ops/attention.h"

namespace ripplekv::kernels::cpu {

void CausalAttention(int num_threads, const float* q, const int32_t* q_positions, int64_t m,
                     int64_t n_heads, std::span<const KvCacheView> segments, float scale,
                     float* out);

}  // namespace ripplekv::kernels::cpu
