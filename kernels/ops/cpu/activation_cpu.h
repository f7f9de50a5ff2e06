#pragma once
// The CPU backend of SwiGLU and the residual add (kernels/ops/activation.h), called only by the
// front end after its checks (no re-validation).

#include <cstdint>

namespace ripplekv::kernels::cpu {

void SwiGlu(int num_threads, const float* gate, const float* up, float* out, int64_t n);
void AddTo(int num_threads, const float* x, float* y, int64_t n);

}  // namespace ripplekv::kernels::cpu
