#pragma once
// bfloat16 for the host emulation (tests/cuda_host): the storage type and the conversions the
// backend uses, rounding as the device does.

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  unsigned short __x;  // the bits
};

// To nearest, ties to even; a NaN becomes the canonical NaN 0x7fff, as on the device.
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fff};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return __nv_bfloat16{static_cast<unsigned short>(bits >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t bits = static_cast<uint32_t>(h.__x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
