#pragma once
// The CPU backend of RoPE (kernels/ops/rope.h), called only by the front end after its checks (no
// re-validation).

#include <cstdint>

#include "kernels/ops/rope.h"

namespace ripplekv::kernels::cpu {

void ApplyRope(int num_threads, const RopeTable& table, const int32_t* positions, float* x,
               int64_t m, int64_t n_heads, int64_t head_dim);

}  // namespace ripplekv::kernels::cpu
