#pragma once
// Branch-free float math that the compiler vectorizes inside `#pragma omp simd` loops (glibc's
// vector expf is only declared under -ffast-math, which we do not use: it would break the
// infinity checks of masked softmax).

#include <bit>
#include <cstdint>

namespace ripplekv::kernels::cpu {

// exp(x) for float, relative error < 2e-7 (about 2 ulp) over the whole range; 0 below -87.3
// (exp underflows there anyway), never inf: inputs above 88 are clamped to 88. Cody-Waite range
// reduction x = n ln2 + r, |r| <= ln2/2, then the Cephes degree-6 polynomial for exp(r).
inline float ExpF(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  const bool underflow = x < -87.3f;
  x = x > 88.0f ? 88.0f : (x < -87.3f ? -87.3f : x);
  const float n = __builtin_floorf(x * kLog2e + 0.5f);
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<int32_t>(n + 127.0f) << 23);
  return underflow ? 0.0f : p * scale;
}

}  // namespace ripplekv::kernels::cpu
