// SwiGLU and the residual add on the CPU, element by element (parallel over elements: each is
// computed on its own, so results do not depend on the thread count).

#include "kernels/ops/cpu/activation_cpu.h"
#include "kernels/ops/cpu/vec_math.h"

namespace ripplekv::kernels::cpu {

void AddTo(int num_threads, const float* x, float* y, int64_t n) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void SwiGlu(int num_threads, const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd num_threads(num_threads) schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + ExpF(-g)) * up[i];
  }
}

}  // namespace ripplekv::kernels::cpu
