// AVX2 + FMA + F16C fused dequantize-dot kernels. Every function that uses these instructions
// carries the target attribute below, so this file builds (and the library runs) on any x86-64
// CPU; gemv.cc calls these kernels only when CpuHasAvx2() says the CPU has the instructions.
// Nothing here may be an inline function shared with other files (that would let the linker pick
// an AVX2 copy for a caller on an older CPU): everything is in an anonymous namespace, the helpers
// shared with the block decoders (avx2_blocks.h) too.
//
// Each weight is the decoder's value (dequant_cpu.cc): a scale-times-quant product, exact in fp32,
// or fma(scale, quant, minimum), which rounds once exactly like the decoder's scale * quant + min.
// Types without a minimum factor the block scale out of the block's dot: d * sum(q * x).

#include "kernels/dequant/gemv_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#include "base/check.h"
#include "kernels/dequant/avx2_blocks.h"
#include "kernels/dequant/cpu_features.h"

#define RIPPLEKV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace ripplekv::kernels::cpu {

namespace {

RIPPLEKV_AVX2 inline float Bf16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Sum of the 8 lanes in a fixed tree.
RIPPLEKV_AVX2 inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The low 8 signed bytes of v as floats.
RIPPLEKV_AVX2 inline __m256 I8ToF(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// Lane sums of q[k] * x[k] for 16 signed bytes q (values 0-15) and x[0, 16).
RIPPLEKV_AVX2 inline __m256 DotI8x16(__m128i q, const float* x) {
  const __m256 a = _mm256_mul_ps(I8ToF(q), _mm256_loadu_ps(x));
  return _mm256_fmadd_ps(I8ToF(_mm_srli_si128(q, 8)), _mm256_loadu_ps(x + 8), a);
}

// Lane sums of q[k] * x[k] for 32 signed bytes: lo holds values 0-15, hi values 16-31.
RIPPLEKV_AVX2 inline __m256 DotI8x32(__m128i lo, __m128i hi, const float* x) {
  __m256 a = _mm256_mul_ps(I8ToF(lo), _mm256_loadu_ps(x));
  __m256 b = _mm256_mul_ps(I8ToF(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8));
  a = _mm256_fmadd_ps(I8ToF(hi), _mm256_loadu_ps(x + 16), a);
  b = _mm256_fmadd_ps(I8ToF(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), b);
  return _mm256_add_ps(a, b);
}

// Lane sums of fma(d, q[k], m) * x[k] for 32 signed bytes (lo: values 0-15, hi: 16-31).
RIPPLEKV_AVX2 inline __m256 DotAffine32(__m128i lo, __m128i hi, __m256 d, __m256 m,
                                        const float* x) {
  __m256 a = _mm256_mul_ps(_mm256_fmadd_ps(d, I8ToF(lo), m), _mm256_loadu_ps(x));
  __m256 b =
      _mm256_mul_ps(_mm256_fmadd_ps(d, I8ToF(_mm_srli_si128(lo, 8)), m), _mm256_loadu_ps(x + 8));
  a = _mm256_fmadd_ps(_mm256_fmadd_ps(d, I8ToF(hi), m), _mm256_loadu_ps(x + 16), a);
  b = _mm256_fmadd_ps(_mm256_fmadd_ps(d, I8ToF(_mm_srli_si128(hi, 8)), m), _mm256_loadu_ps(x + 24),
                      b);
  return _mm256_add_ps(a, b);
}

// 32 bytes: byte i is 0x10 when bit i of the little-endian u32 at p is set, else 0.
RIPPLEKV_AVX2 inline __m256i FifthBits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                            0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuffle);
  // Byte i keeps every bit but bit (i % 8); it is all ones exactly when that bit was set.
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  bytes = _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

// The 16 nibble pairs of a 32-value block: low nibbles (values 0-15) and high (values 16-31).
RIPPLEKV_AVX2 inline void Nibbles16(const uint8_t* qs, __m128i* lo, __m128i* hi) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  *lo = _mm_and_si128(raw, m4);
  *hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
}

// Decode streams the weights from memory once per token, and the hardware prefetchers alone keep
// too few lines in flight for these kernels (measured on an 84 MB q4_1 matrix: 2.7 GB/s without,
// 8 GB/s with, the in-cache rate): each loop step asks for the cache lines it will read
// kPrefetchAhead bytes later. Rows are contiguous, so the stream runs on into the next row;
// a prefetch past the end of the weights is harmless (it never faults).
constexpr int64_t kPrefetchAhead = 2048;
constexpr int64_t kCacheLine = 64;

// Prefetches the lines of [p + kPrefetchAhead, p + kPrefetchAhead + kBytes).
template <int64_t kBytes>
RIPPLEKV_AVX2 inline void PrefetchAhead(const uint8_t* p) {
  for (int64_t off = 0; off < kBytes; off += kCacheLine) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + off), _MM_HINT_T0);
  }
}

// Block kernels: Dot(block, x) returns the lane sums of the block's contribution.

struct Q8_0 {
  static constexpr int64_t kBytes = 34, kValues = 32;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18));
    return _mm256_mul_ps(_mm256_set1_ps(HalfAt(b)), DotI8x32(lo, hi, x));
  }
};

struct Q4_0 {
  static constexpr int64_t kBytes = 18, kValues = 32;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    __m256i q[4];
    NibbleGroups(b + 2, q);
    const __m256i eight = _mm256_set1_epi32(8);
    __m256 f[4];
    for (int g = 0; g < 4; ++g) f[g] = _mm256_cvtepi32_ps(_mm256_sub_epi32(q[g], eight));
    __m256 a = _mm256_mul_ps(f[0], _mm256_loadu_ps(x));
    __m256 c = _mm256_mul_ps(f[1], _mm256_loadu_ps(x + 8));
    a = _mm256_fmadd_ps(f[2], _mm256_loadu_ps(x + 16), a);
    c = _mm256_fmadd_ps(f[3], _mm256_loadu_ps(x + 24), c);
    return _mm256_mul_ps(_mm256_set1_ps(HalfAt(b)), _mm256_add_ps(a, c));
  }
};

struct Q4_1 {
  static constexpr int64_t kBytes = 20, kValues = 32;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    __m256i q[4];
    NibbleGroups(b + 4, q);
    const __m256 d = _mm256_set1_ps(HalfAt(b)), m = _mm256_set1_ps(HalfAt(b + 2));
    __m256 w[4];
    for (int g = 0; g < 4; ++g) w[g] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[g]), m);
    __m256 a = _mm256_mul_ps(w[0], _mm256_loadu_ps(x));
    __m256 c = _mm256_mul_ps(w[1], _mm256_loadu_ps(x + 8));
    a = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), a);
    c = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), c);
    return _mm256_add_ps(a, c);
  }
};

struct Q5_0 {
  static constexpr int64_t kBytes = 22, kValues = 32;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    __m128i lo, hi;
    Nibbles16(b + 6, &lo, &hi);
    const __m256i fifth = FifthBits(b + 2);
    const __m128i sixteen = _mm_set1_epi8(16);
    lo = _mm_sub_epi8(_mm_or_si128(lo, _mm256_castsi256_si128(fifth)), sixteen);
    hi = _mm_sub_epi8(_mm_or_si128(hi, _mm256_extracti128_si256(fifth, 1)), sixteen);
    return _mm256_mul_ps(_mm256_set1_ps(HalfAt(b)), DotI8x32(lo, hi, x));
  }
};

struct Q5_1 {
  static constexpr int64_t kBytes = 24, kValues = 32;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    __m128i lo, hi;
    Nibbles16(b + 8, &lo, &hi);
    const __m256i fifth = FifthBits(b + 4);
    lo = _mm_or_si128(lo, _mm256_castsi256_si128(fifth));
    hi = _mm_or_si128(hi, _mm256_extracti128_si256(fifth, 1));
    return DotAffine32(lo, hi, _mm256_set1_ps(HalfAt(b)), _mm256_set1_ps(HalfAt(b + 2)), x);
  }
};

// The packed 6-bit scale and min of sub-block j of a q4_k/q5_k super-block (see dequant_cpu.cc).
inline void KQuantScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// q4_k and q5_k: for each pair of 32-value sub-blocks, `lo` (sub-block 2p) and `hi` (2p + 1)
// hold the quants as 32 bytes; value = (d * scale) * q - dmin * min.
template <bool kFifthBit>
struct QK45 {
  static constexpr int64_t kBytes = kFifthBit ? 176 : 144, kValues = 256;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    const float d = HalfAt(b);
    const float dmin = HalfAt(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qs = b + (kFifthBit ? 48 : 16);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i sixteen = _mm256_set1_epi8(0x10);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFifthBit) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * pair));
      __m256i lo = _mm256_and_si256(raw, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (kFifthBit) {
        const __m256i bit0 = _mm256_set1_epi8(static_cast<char>(1 << (2 * pair)));
        const __m256i bit1 = _mm256_set1_epi8(static_cast<char>(1 << (2 * pair + 1)));
        lo = _mm256_or_si256(
            lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit0), bit0), sixteen));
        hi = _mm256_or_si256(
            hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit1), bit1), sixteen));
      }
      const float* xp = x + 64 * pair;
      s0 =
          _mm256_add_ps(s0, DotAffine32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1),
                                        _mm256_set1_ps(d * static_cast<float>(sc0)),
                                        _mm256_set1_ps(-(dmin * static_cast<float>(m0))), xp));
      s1 =
          _mm256_add_ps(s1, DotAffine32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1),
                                        _mm256_set1_ps(d * static_cast<float>(sc1)),
                                        _mm256_set1_ps(-(dmin * static_cast<float>(m1))), xp + 32));
    }
    return _mm256_add_ps(s0, s1);
  }
};

// q6_k: two halves of 128 values; in each, quarter i (32 values at 32 * i) takes its low 4 bits
// from ql (low nibbles of ql[0, 32) for i = 0, of ql[32, 64) for 1, high nibbles for 2 and 3) and
// its top 2 bits from bits 2i, 2i + 1 of qh[l]; minus 32; one int8 scale per 16 values.
struct Q6_K {
  static constexpr int64_t kBytes = 210, kValues = 256;
  RIPPLEKV_AVX2 static __m256 Dot(const uint8_t* b, const float* x) {
    const int8_t* sc_all = reinterpret_cast<const int8_t*>(b + 192);
    const float d = HalfAt(b + 208);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const __m256i thirty_two = _mm256_set1_epi8(32);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b + 64 * half;
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(qh, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      const int8_t* sc = sc_all + 8 * half;
      const float* xh = x + 128 * half;
      for (int i = 0; i < 4; ++i) {
        const __m256i qi = _mm256_sub_epi8(q[i], thirty_two);
        const float* xp = xh + 32 * i;
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * i])),
                                 DotI8x16(_mm256_castsi256_si128(qi), xp), acc[i]);
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * i + 1])),
                                 DotI8x16(_mm256_extracti128_si256(qi, 1), xp + 16), acc[i]);
      }
    }
    return _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  }
};

// A row of blocks: even blocks into one sum, odd blocks into another (two dependency chains).
template <class Block>
RIPPLEKV_AVX2 float DotBlocks(const uint8_t* row, const float* x, int64_t n_blocks) {
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= n_blocks; b += 2) {
    PrefetchAhead<2 * Block::kBytes>(row + b * Block::kBytes);
    even = _mm256_add_ps(even, Block::Dot(row + b * Block::kBytes, x + b * Block::kValues));
    odd =
        _mm256_add_ps(odd, Block::Dot(row + (b + 1) * Block::kBytes, x + (b + 1) * Block::kValues));
  }
  if (b < n_blocks) {
    even = _mm256_add_ps(even, Block::Dot(row + b * Block::kBytes, x + b * Block::kValues));
  }
  return Hsum(_mm256_add_ps(even, odd));
}

// Plain types: 8 values per load, four sums over runs of 32, then runs of 8, then a scalar tail.
struct F32 {
  static constexpr int64_t kBytes = 4;
  RIPPLEKV_AVX2 static __m256 Load8(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  RIPPLEKV_AVX2 static float Load1(const uint8_t* p) {
    float f;
    std::memcpy(&f, p, sizeof(f));
    return f;
  }
};
struct F16 {
  static constexpr int64_t kBytes = 2;
  RIPPLEKV_AVX2 static __m256 Load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  RIPPLEKV_AVX2 static float Load1(const uint8_t* p) { return HalfAt(p); }
};
struct BF16 {
  static constexpr int64_t kBytes = 2;
  RIPPLEKV_AVX2 static __m256 Load8(const uint8_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  RIPPLEKV_AVX2 static float Load1(const uint8_t* p) { return Bf16At(p); }
};

template <class Plain>
RIPPLEKV_AVX2 float DotPlain(const uint8_t* row, const float* x, int64_t n) {
  constexpr int64_t kB = Plain::kBytes;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    PrefetchAhead<32 * kB>(row + k * kB);
    a0 = _mm256_fmadd_ps(Plain::Load8(row + k * kB), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(Plain::Load8(row + (k + 8) * kB), _mm256_loadu_ps(x + k + 8), a1);
    a2 = _mm256_fmadd_ps(Plain::Load8(row + (k + 16) * kB), _mm256_loadu_ps(x + k + 16), a2);
    a3 = _mm256_fmadd_ps(Plain::Load8(row + (k + 24) * kB), _mm256_loadu_ps(x + k + 24), a3);
  }
  for (; k + 8 <= n; k += 8) {
    a0 = _mm256_fmadd_ps(Plain::Load8(row + k * kB), _mm256_loadu_ps(x + k), a0);
  }
  float tail = 0.0f;
  for (; k < n; ++k) tail += Plain::Load1(row + k * kB) * x[k];
  return Hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

}  // namespace

GemvRowKernel Avx2GemvKernel(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return DotPlain<F32>;
    case GgmlType::kF16:
      return DotPlain<F16>;
    case GgmlType::kBF16:
      return DotPlain<BF16>;
    case GgmlType::kQ8_0:
      return DotBlocks<Q8_0>;
    case GgmlType::kQ4_0:
      return DotBlocks<Q4_0>;
    case GgmlType::kQ4_1:
      return DotBlocks<Q4_1>;
    case GgmlType::kQ5_0:
      return DotBlocks<Q5_0>;
    case GgmlType::kQ5_1:
      return DotBlocks<Q5_1>;
    case GgmlType::kQ4_K:
      return DotBlocks<QK45<false>>;
    case GgmlType::kQ5_K:
      return DotBlocks<QK45<true>>;
    case GgmlType::kQ6_K:
      return DotBlocks<Q6_K>;
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
  return nullptr;
}

bool CpuHasAvx2() {
  return CpuHasAvx2FmaF16c();
}

}  // namespace ripplekv::kernels::cpu

#else  // not x86

namespace ripplekv::kernels::cpu {
GemvRowKernel Avx2GemvKernel(GgmlType) { return nullptr; }
bool CpuHasAvx2() { return false; }
}  // namespace ripplekv::kernels::cpu

#endif
