#pragma once
// The CPU backend of the linear layer (kernels/ops/linear.h), called only by the front end after
// its checks (no re-validation).

#include <cstdint>

#include "kernels/dequant/weight.h"

namespace ripplekv::kernels::cpu {

// y = x * W^T over a stored weight (kernels/dequant/weight.h): the slices of Linear, each expanded
// into a per-thread fp32 buffer first.
void LinearStored(int num_threads, const float* x, int64_t x_stride, const Weight& w,
                  const float* bias, float* y, int64_t m, bool accumulate);

void Linear(int num_threads, const float* x, int64_t x_stride, const float* w, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate);

}  // namespace ripplekv::kernels::cpu
