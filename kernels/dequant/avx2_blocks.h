#pragma once
// AVX2 + F16C helpers shared by the block decoders (dequant_avx2.cc) and the fused GEMV
// (gemv_avx2.cc). Include only from those two files, inside their x86 sections. Everything is in
// an anonymous namespace, so each file gets its own copy with internal linkage (the linker never
// picks an AVX2 copy for a caller on an older CPU), and the target is "avx2,f16c": no arithmetic
// here, and a subset of both files' targets, so the helpers inline into either.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define RIPPLEKV_AVX2_F16C_HELPER __attribute__((target("avx2,f16c")))

namespace ripplekv::kernels::cpu {
namespace {

// The fp16 at p (any alignment) as a float, with F16C (exact).
RIPPLEKV_AVX2_F16C_HELPER inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Bytes p[0, 8) zero-extended to eight int32 lanes (one load-and-widen instruction).
RIPPLEKV_AVX2_F16C_HELPER inline __m256i Widen8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// The 32 nibbles of a q4/q5 block as four groups of eight int32 lanes, values [8g, 8g + 8):
// bytes j and j + 8 hold values j and j + 8 in their low nibbles, j + 16 and j + 24 in their high
// (only two byte widenings per block).
RIPPLEKV_AVX2_F16C_HELPER inline void NibbleGroups(const uint8_t* qs, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi32(0x0f);
  const __m256i b0 = Widen8(qs), b1 = Widen8(qs + 8);
  q[0] = _mm256_and_si256(b0, m4);
  q[1] = _mm256_and_si256(b1, m4);
  q[2] = _mm256_srli_epi32(b0, 4);
  q[3] = _mm256_srli_epi32(b1, 4);
}

}  // namespace
}  // namespace ripplekv::kernels::cpu
