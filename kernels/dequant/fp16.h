#pragma once
// IEEE 754 binary16 ("half", GGML's fp16) and bfloat16 <-> fp32 conversion, header-only and
// bit-exact on every compiler: float -> 16-bit rounds to nearest, ties to even; overflow gives
// infinity; NaN stays NaN (its top payload bits are kept, and the result is never infinity).
// 16 -> float is exact (every half and bf16 value is a float), subnormals included.

#include <bit>
#include <cstdint>

namespace ripplekv::kernels {

constexpr float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // infinity or NaN: payload moves to the top of the float mantissa
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

constexpr uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    const uint32_t payload = (magnitude >> 13) & 0x3ffu;
    return static_cast<uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 0x200u));
  }
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent > 15) return sign | 0x7c00u;  // beyond the largest finite half: infinity
  if (exponent >= -14) {                     // lands in the normal half range
    const uint32_t mantissa = magnitude & 0x7fffffu;
    uint32_t h = (static_cast<uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    // A carry out of the mantissa bumps the exponent, up to 0x7c00 (infinity): both correct.
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal: rounds to zero
  // Subnormal half: count units of 2^-24. The significand (with its implicit bit) is
  // value * 2^(23 - exponent); dividing by 2^-24 is a right shift by -(exponent + 1) in [14, 24].
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -(exponent + 1);
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) ++q;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | q);
}

constexpr float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

constexpr uint16_t FloatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate and force the quiet bit
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace ripplekv::kernels
