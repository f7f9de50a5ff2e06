// AVX2 + F16C block decoders behind cpu::DequantizeBlocks (dequant_cpu.h). Every function that
// uses these instructions carries the target attribute below, so this file builds (and the library
// runs) on any x86-64 CPU; DequantizeBlocks calls these decoders only when DequantAvx2Supported()
// says the CPU has the instructions. Nothing here is an inline function shared with other files
// (the linker could pick an AVX2 copy for a caller on an older CPU): everything is in an anonymous
// namespace, the helpers shared with the GEMV (avx2_blocks.h) too.
//
// Bit-identity with the scalar decoders (dequant_cpu.cc) is the contract, so each value is computed
// with the same operations in the same order: int quant -> float, then `d * q` (one multiply),
// `d * q + m` (a multiply, then an add: never an FMA, which this file's target does not even
// enable), K-quant sub-block factors `d * scale` and `dmin * min` as scalar float products exactly
// as the scalar code forms them, then `(d * scale) * q - dmin * min`. fp16 scales are converted
// with F16C, which is exact like HalfToFloat; the two differ only for a signalling-NaN scale
// (F16C quiets it), and a scale is always a multiply operand, which quiets it in the scalar path
// too. F16 arrays do reach the output unconverted, so 16-value runs that hold a NaN are decoded
// with HalfToFloat (payload kept bit for bit, as the scalar decoder does).

#include "kernels/dequant/dequant_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#include "base/check.h"
#include "kernels/dequant/avx2_blocks.h"
#include "kernels/dequant/cpu_features.h"
#include "kernels/dequant/fp16.h"

#define RIPPLEKV_AVX2_F16C __attribute__((target("avx2,f16c")))

namespace ripplekv::kernels::cpu {

namespace {

RIPPLEKV_AVX2_F16C uint16_t U16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

RIPPLEKV_AVX2_F16C void Store(float* dst, __m256 v) { _mm256_storeu_ps(dst, v); }

// ---------------------------------------------------------------- plain types

// 16 values at a time with F16C; a run holding a NaN (any exponent-31 pattern but infinity) goes
// through HalfToFloat, because F16C sets the quiet bit of a signalling NaN and the scalar decoder
// keeps it clear. The tail (< 16 values) is scalar too.
RIPPLEKV_AVX2_F16C void DecodeF16(const uint8_t* src, int64_t n, float* dst) {
  const __m256i magnitude = _mm256_set1_epi16(0x7fff);
  const __m256i infinity = _mm256_set1_epi16(0x7c00);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    // Magnitudes are <= 0x7fff, so the signed 16-bit compare is exact.
    const __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, magnitude), infinity);
    if (!_mm256_testz_si256(nan, nan)) {
      for (int64_t k = i; k < i + 16; ++k) dst[k] = HalfToFloat(U16At(src + 2 * k));
      continue;
    }
    Store(dst + i, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
    Store(dst + i + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
  }
  for (; i < n; ++i) dst[i] = HalfToFloat(U16At(src + 2 * i));
}

// bf16 is the top half of an fp32: widen and shift (exact for every pattern, NaN included).
RIPPLEKV_AVX2_F16C void DecodeBf16(const uint8_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
    Store(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i) dst[i] = Bf16ToFloat(U16At(src + 2 * i));
}

// ---------------------------------------------------------------- 32-value blocks

// q8_0: x = d * q.
RIPPLEKV_AVX2_F16C void DecodeQ8_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 34, dst += 32) {
    const __m256 d = _mm256_set1_ps(HalfAt(src));
    for (int g = 0; g < 4; ++g) {
      const __m256i q =
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * g)));
      Store(dst + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
    }
  }
}

// ORs the fifth bit of each value (bit i of the little-endian u32 at p is value i's) into
// NibbleGroups' lanes, as 0x10.
RIPPLEKV_AVX2_F16C void AddFifthBits(const uint8_t* p, __m256i q[4]) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  const __m256i all = _mm256_set1_epi32(static_cast<int>(bits));
  const __m256i one = _mm256_set1_epi32(1);
  __m256i shift = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int g = 0; g < 4; ++g) {
    const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(all, shift), one);
    q[g] = _mm256_or_si256(q[g], _mm256_slli_epi32(bit, 4));
    shift = _mm256_add_epi32(shift, _mm256_set1_epi32(8));
  }
}

// x = d * (q - offset).
template <int kOffset>
RIPPLEKV_AVX2_F16C void StoreScaled(const __m256i q[4], __m256 d, float* dst) {
  const __m256i offset = _mm256_set1_epi32(kOffset);
  for (int g = 0; g < 4; ++g) {
    Store(dst + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q[g], offset))));
  }
}

// x = d * q + m: a rounded product (exact here, but written as the scalar code has it), then a
// rounded sum.
RIPPLEKV_AVX2_F16C void StoreAffine(const __m256i q[4], __m256 d, __m256 m, float* dst) {
  for (int g = 0; g < 4; ++g) {
    Store(dst + 8 * g, _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q[g])), m));
  }
}

RIPPLEKV_AVX2_F16C void DecodeQ4_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 18, dst += 32) {
    __m256i q[4];
    NibbleGroups(src + 2, q);
    StoreScaled<8>(q, _mm256_set1_ps(HalfAt(src)), dst);
  }
}

RIPPLEKV_AVX2_F16C void DecodeQ4_1(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 20, dst += 32) {
    __m256i q[4];
    NibbleGroups(src + 4, q);
    StoreAffine(q, _mm256_set1_ps(HalfAt(src)), _mm256_set1_ps(HalfAt(src + 2)), dst);
  }
}

RIPPLEKV_AVX2_F16C void DecodeQ5_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 22, dst += 32) {
    __m256i q[4];
    NibbleGroups(src + 6, q);
    AddFifthBits(src + 2, q);
    StoreScaled<16>(q, _mm256_set1_ps(HalfAt(src)), dst);
  }
}

RIPPLEKV_AVX2_F16C void DecodeQ5_1(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 24, dst += 32) {
    __m256i q[4];
    NibbleGroups(src + 8, q);
    AddFifthBits(src + 4, q);
    StoreAffine(q, _mm256_set1_ps(HalfAt(src)), _mm256_set1_ps(HalfAt(src + 2)), dst);
  }
}

// ---------------------------------------------------------------- 256-value super-blocks

// The packed 6-bit scale and min of sub-block j of a q4_k/q5_k super-block (dequant_cpu.cc).
void KQuantScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// q4_k / q5_k: sub-blocks 2p and 2p + 1 come from the low and high nibbles of qs[32p, 32p + 32);
// q5_k's fifth bit of value l of sub-block s is bit s of qh[l]. x = (d * scale) * q - dmin * min.
template <bool kFifthBit>
RIPPLEKV_AVX2_F16C void DecodeQK45(const uint8_t* src, int64_t n_blocks, float* dst) {
  constexpr int64_t kBytes = kFifthBit ? 176 : 144;
  const __m256i m4 = _mm256_set1_epi32(0x0f);
  const __m256i bit4 = _mm256_set1_epi32(0x10);
  for (int64_t b = 0; b < n_blocks; ++b, src += kBytes, dst += 256) {
    const float d = HalfAt(src);
    const float dmin = HalfAt(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + (kFifthBit ? 48 : 16);
    __m256i qh[4];  // qh[8k, 8k + 8) widened; shifted right by 2 after each pair
    if constexpr (kFifthBit) {
      for (int k = 0; k < 4; ++k) qh[k] = Widen8(src + 16 + 8 * k);
    }
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const __m256 d0 = _mm256_set1_ps(d * static_cast<float>(sc0));
      const __m256 min0 = _mm256_set1_ps(dmin * static_cast<float>(m0));
      const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(sc1));
      const __m256 min1 = _mm256_set1_ps(dmin * static_cast<float>(m1));
      const uint8_t* q = qs + 32 * pair;
      float* y = dst + 64 * pair;
      for (int k = 0; k < 4; ++k) {
        const __m256i raw = Widen8(q + 8 * k);
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_srli_epi32(raw, 4);
        if constexpr (kFifthBit) {
          lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi32(qh[k], 4), bit4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi32(qh[k], 3), bit4));
          qh[k] = _mm256_srli_epi32(qh[k], 2);
        }
        Store(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d0, _mm256_cvtepi32_ps(lo)), min0));
        Store(y + 32 + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, _mm256_cvtepi32_ps(hi)), min1));
      }
    }
  }
}

// q6_k (layout in dequant_cpu.cc): x = (d * scale) * (q - 32), one int8 scale per 16 values.
RIPPLEKV_AVX2_F16C void DecodeQ6_K(const uint8_t* src, int64_t n_blocks, float* dst) {
  const __m256i m4 = _mm256_set1_epi32(0x0f);
  const __m256i m30 = _mm256_set1_epi32(0x30);
  const __m256i thirty_two = _mm256_set1_epi32(32);
  for (int64_t b = 0; b < n_blocks; ++b, src += 210, dst += 256) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = HalfAt(src + 208);
    float ds[16];
    for (int j = 0; j < 16; ++j) ds[j] = d * static_cast<float>(sc[j]);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = src + 64 * half;
      const uint8_t* qh = src + 128 + 32 * half;
      const float* s = ds + 8 * half;
      float* y = dst + 128 * half;
      for (int k = 0; k < 4; ++k) {  // values l in [8k, 8k + 8) of each quarter
        const int group = k / 2;
        const __m256i a = Widen8(ql + 8 * k);
        const __m256i c = Widen8(ql + 32 + 8 * k);
        const __m256i h = Widen8(qh + 8 * k);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(a, m4),
                               _mm256_and_si256(_mm256_slli_epi32(h, 4), m30));
        q[1] = _mm256_or_si256(_mm256_and_si256(c, m4),
                               _mm256_and_si256(_mm256_slli_epi32(h, 2), m30));
        q[2] = _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(h, m30));
        q[3] = _mm256_or_si256(_mm256_srli_epi32(c, 4),
                               _mm256_and_si256(_mm256_srli_epi32(h, 2), m30));
        for (int i = 0; i < 4; ++i) {
          const __m256 qf = _mm256_cvtepi32_ps(_mm256_sub_epi32(q[i], thirty_two));
          Store(y + 32 * i + 8 * k, _mm256_mul_ps(_mm256_set1_ps(s[group + 2 * i]), qf));
        }
      }
    }
  }
}

}  // namespace

void DequantizeBlocksAvx2(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n_blocks) * sizeof(float));
      return;
    case GgmlType::kF16:
      return DecodeF16(src, n_blocks, dst);
    case GgmlType::kBF16:
      return DecodeBf16(src, n_blocks, dst);
    case GgmlType::kQ8_0:
      return DecodeQ8_0(src, n_blocks, dst);
    case GgmlType::kQ4_0:
      return DecodeQ4_0(src, n_blocks, dst);
    case GgmlType::kQ4_1:
      return DecodeQ4_1(src, n_blocks, dst);
    case GgmlType::kQ5_0:
      return DecodeQ5_0(src, n_blocks, dst);
    case GgmlType::kQ5_1:
      return DecodeQ5_1(src, n_blocks, dst);
    case GgmlType::kQ4_K:
      return DecodeQK45<false>(src, n_blocks, dst);
    case GgmlType::kQ5_K:
      return DecodeQK45<true>(src, n_blocks, dst);
    case GgmlType::kQ6_K:
      return DecodeQ6_K(src, n_blocks, dst);
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
}

bool DequantAvx2Supported() {
  return CpuHasAvx2FmaF16c();
}

}  // namespace ripplekv::kernels::cpu

#else  // not x86: the portable decoders only

namespace ripplekv::kernels::cpu {
void DequantizeBlocksAvx2(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst) {
  DequantizeBlocksScalar(type, src, n_blocks, dst);
}
bool DequantAvx2Supported() { return false; }
}  // namespace ripplekv::kernels::cpu

#endif
