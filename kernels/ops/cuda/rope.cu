// RoPE on the device, with the CPU's arithmetic (kernels/ops/cpu/rope_cpu.cc): the angle
// position * inv_freq[p] in double, its cosine and sine in double rounded to float, the rotation
// in float (the compilers may contract it into FMAs differently: tested within tolerance).

#include <cuda_runtime.h>

#include "kernels/ops/cuda/launch.cuh"
#include "kernels/ops/cuda/rope.h"

namespace ripplekv::kernels::cuda {

namespace {

// The frequencies travel as a kernel argument (at most kMaxRopePairs floats, 1 KiB).
struct Frequencies {
  float inv_freq[kMaxRopePairs];
};

// One block per row; threads over (head, pair).
__global__ void RopeKernel(Frequencies f, const int32_t* positions, float* x, int64_t n_heads,
                           int64_t head_dim, bool interleaved) {
  const int64_t half = head_dim / 2;
  const int64_t row = blockIdx.x;
  const double position = static_cast<double>(positions[row]);
  for (int64_t t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
    const int64_t h = t / half, p = t % half;
    const double angle = position * f.inv_freq[p];
    const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
    float* v = x + (row * n_heads + h) * head_dim;
    const int64_t a = interleaved ? 2 * p : p;
    const int64_t b = interleaved ? 2 * p + 1 : p + half;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace

int ApplyRope(const OpContext& ctx, const float* inv_freq, int64_t pairs, bool interleaved, const int32_t* positions,
               float* x, int64_t m, int64_t n_heads, int64_t head_dim) {
  if (m == 0) return 0;
  Frequencies f{};
  for (int64_t p = 0; p < pairs; ++p) f.inv_freq[p] = inv_freq[p];
  RopeKernel<<<static_cast<unsigned>(m), 256, 0, StreamOf(ctx)>>>(f, positions, x, n_heads, head_dim, interleaved);
  return LaunchResult(ctx, "ApplyRope");
}

}  // namespace ripplekv::kernels::cuda
