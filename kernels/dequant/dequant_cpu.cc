#include "kernels/dequant/dequant_cpu.h"

#include <cstring>

#include "base/check.h"
#include "kernels/dequant/fp16.h"

namespace ripplekv::kernels::cpu {

namespace {

// Unaligned little-endian loads: block data comes straight from a file mapping or a fuzzer buffer.
inline float LoadHalf(const uint8_t* p) {
  return HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}
inline uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

void DecodeF32(const uint8_t* src, int64_t n, float* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void DecodeF16(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = LoadHalf(src + 2 * i);
}

void DecodeBf16(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = Bf16ToFloat(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
  }
}

// q8_0: 32 values, x = d * q with q a signed byte.
void DecodeQ8_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 34, dst += 32) {
    const float d = LoadHalf(src);
    const uint8_t* qs = src + 2;
    for (int i = 0; i < 32; ++i) dst[i] = d * static_cast<float>(static_cast<int8_t>(qs[i]));
  }
}

// q4_0: 32 values; byte j holds value j in its low nibble and value j + 16 in its high nibble;
// x = d * (nibble - 8).
void DecodeQ4_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 18, dst += 32) {
    const float d = LoadHalf(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      dst[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// q4_1: as q4_0 with a minimum instead of the -8 offset: x = d * nibble + m.
void DecodeQ4_1(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 20, dst += 32) {
    const float d = LoadHalf(src);
    const float m = LoadHalf(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
      dst[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

// q5_0: 5-bit values; nibbles as q4_0, the fifth bit of value i is bit i of the little-endian
// 32-bit qh; x = d * (q - 16).
void DecodeQ5_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 22, dst += 32) {
    const float d = LoadHalf(src);
    const uint32_t qh = LoadU32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

// q5_1: as q5_0 with a minimum: x = d * q + m.
void DecodeQ5_1(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 24, dst += 32) {
    const float d = LoadHalf(src);
    const float m = LoadHalf(src + 2);
    const uint32_t qh = LoadU32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// The 12 scale bytes of q4_k/q5_k pack eight 6-bit scales and eight 6-bit mins. Sub-blocks 0-3:
// scale = low 6 bits of byte j, min = low 6 bits of byte j + 4. Sub-blocks 4-7: the low 4 bits
// come from byte j + 4 (scale in its low nibble, min in its high nibble) and the top 2 bits from
// the spare top bits of byte j - 4 (scale) and byte j (min).
inline void KQuantScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// q4_k: super-block of 256 = 8 sub-blocks of 32. Each 32-byte run of qs covers two sub-blocks:
// low nibbles are sub-block 2k, high nibbles sub-block 2k + 1. x = d*scale * q - dmin*min.
void DecodeQ4_K(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 144, dst += 256) {
    const float d = LoadHalf(src);
    const float dmin = LoadHalf(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + 16;
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      const uint8_t* q = qs + 32 * pair;
      float* y = dst + 64 * pair;
      for (int l = 0; l < 32; ++l) {
        y[l] = d0 * static_cast<float>(q[l] & 0x0f) - min0;
        y[l + 32] = d1 * static_cast<float>(q[l] >> 4) - min1;
      }
    }
  }
}

// q5_k: q4_k plus a fifth bit per value: for sub-block s, bit s of qh[l] is the high bit of
// value l of that sub-block.
void DecodeQ5_K(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 176, dst += 256) {
    const float d = LoadHalf(src);
    const float dmin = LoadHalf(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      const int bit0 = 2 * pair, bit1 = 2 * pair + 1;
      const uint8_t* q = qs + 32 * pair;
      float* y = dst + 64 * pair;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0f) | (((qh[l] >> bit0) & 1) << 4);
        const int hi = (q[l] >> 4) | (((qh[l] >> bit1) & 1) << 4);
        y[l] = d0 * static_cast<float>(lo) - min0;
        y[l + 32] = d1 * static_cast<float>(hi) - min1;
      }
    }
  }
}

// q6_k: super-block of 256 in two halves of 128. In half h, with ql = ql_all + 64h,
// qh = qh_all + 32h, sc = scales + 8h, for l in [0, 32):
//   value l      = low nibble of ql[l]       | bits 0-1 of qh[l] << 4
//   value l + 32 = low nibble of ql[l + 32]  | bits 2-3 of qh[l] << 4
//   value l + 64 = high nibble of ql[l]      | bits 4-5 of qh[l] << 4
//   value l + 96 = high nibble of ql[l + 32] | bits 6-7 of qh[l] << 4
// each minus 32, times d * sc[l / 16 + 2 * quarter] (one int8 scale per 16 values).
void DecodeQ6_K(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 210, dst += 256) {
    const uint8_t* ql_all = src;
    const uint8_t* qh_all = src + 128;
    const int8_t* sc_all = reinterpret_cast<const int8_t*>(src + 192);
    const float d = LoadHalf(src + 208);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = ql_all + 64 * half;
      const uint8_t* qh = qh_all + 32 * half;
      const int8_t* sc = sc_all + 8 * half;
      float* y = dst + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int group = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[group]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[group + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[group + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[group + 6]) * static_cast<float>(q3);
      }
    }
  }
}

// Below this many values a tensor is decoded on the calling thread (thread start-up would cost
// more than the work).
constexpr int64_t kParallelThreshold = int64_t{1} << 16;

}  // namespace

void DequantizeBlocks(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst) {
  if (DequantAvx2Supported()) return DequantizeBlocksAvx2(type, src, n_blocks, dst);
  DequantizeBlocksScalar(type, src, n_blocks, dst);
}

void DequantizeBlocksScalar(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst) {
  switch (type) {
    case GgmlType::kF32:
      return DecodeF32(src, n_blocks, dst);
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
      return DecodeQ4_K(src, n_blocks, dst);
    case GgmlType::kQ5_K:
      return DecodeQ5_K(src, n_blocks, dst);
    case GgmlType::kQ6_K:
      return DecodeQ6_K(src, n_blocks, dst);
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
}

void DequantizeRows(GgmlType type, const uint8_t* src, int64_t n_rows, int64_t row_elements,
                    float* dst) {
  const GgmlTypeTraits traits = TraitsOf(type);
  const int64_t row_blocks = row_elements / traits.block_elements;
  const int64_t row_bytes = row_blocks * traits.block_bytes;
  const bool parallel = n_rows > 1 && n_rows * row_elements >= kParallelThreshold;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < n_rows; ++r) {
    DequantizeBlocks(type, src + r * row_bytes, row_blocks, dst + r * row_elements);
  }
}

}  // namespace ripplekv::kernels::cpu
