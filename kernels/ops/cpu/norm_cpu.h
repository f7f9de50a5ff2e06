#pragma once
// The CPU backend of RMSNorm (kernels/ops/norm.h), called only by the front end after its checks
// (no re-validation).

#include <cstdint>

namespace ripplekv::kernels::cpu {

void RmsNorm(int num_threads, const float* x, const float* weight, float eps, float* y, int64_t m,
             int64_t d);

}  // namespace ripplekv::kernels::cpu
