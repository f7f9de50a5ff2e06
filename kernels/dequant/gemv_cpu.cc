// Portable fused dequantize-dot kernels: each weight is computed with the same expression as the
// decoder in dequant_cpu.cc (so it has the same value), multiplied by x[k] and added to one of
// eight running sums (value k goes to sum k % 8), which are combined in a fixed tree at the end.

#include "kernels/dequant/gemv_cpu.h"

#include <cstring>

#include "kernels/base/check.h"
#include "kernels/dequant/fp16.h"

namespace ripplekv::kernels::cpu {

namespace {

inline float LoadHalf(const uint8_t* p) {
  return HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}
inline float LoadBf16(const uint8_t* p) {
  return Bf16ToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}
inline uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Eight running sums of products; value k of a block goes to sum k % 8 (block lengths are
// multiples of 8, so this is also k % 8 of the row).
struct Lanes {
  float s[8] = {};
  void Add(int k, float w, float x) { s[k & 7] += w * x; }
  float Sum() const { return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); }
};

float DotF32(const uint8_t* row, const float* x, int64_t n) {
  Lanes acc;
  for (int64_t k = 0; k < n; ++k) {
    float w;
    std::memcpy(&w, row + 4 * k, sizeof(w));
    acc.Add(static_cast<int>(k & 7), w, x[k]);
  }
  return acc.Sum();
}

float DotF16(const uint8_t* row, const float* x, int64_t n) {
  Lanes acc;
  for (int64_t k = 0; k < n; ++k) acc.Add(static_cast<int>(k & 7), LoadHalf(row + 2 * k), x[k]);
  return acc.Sum();
}

float DotBf16(const uint8_t* row, const float* x, int64_t n) {
  Lanes acc;
  for (int64_t k = 0; k < n; ++k) acc.Add(static_cast<int>(k & 7), LoadBf16(row + 2 * k), x[k]);
  return acc.Sum();
}

// q8_0: x = d * q, q a signed byte.
float DotQ8_0(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 34, x += 32) {
    const float d = LoadHalf(row);
    const uint8_t* qs = row + 2;
    for (int i = 0; i < 32; ++i) {
      acc.Add(i, d * static_cast<float>(static_cast<int8_t>(qs[i])), x[i]);
    }
  }
  return acc.Sum();
}

// q4_0: byte j holds value j (low nibble) and value j + 16 (high nibble); x = d * (nibble - 8).
float DotQ4_0(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 18, x += 32) {
    const float d = LoadHalf(row);
    const uint8_t* qs = row + 2;
    for (int j = 0; j < 16; ++j) {
      acc.Add(j, d * static_cast<float>((qs[j] & 0x0f) - 8), x[j]);
      acc.Add(j + 16, d * static_cast<float>((qs[j] >> 4) - 8), x[j + 16]);
    }
  }
  return acc.Sum();
}

// q4_1: x = d * nibble + m.
float DotQ4_1(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 20, x += 32) {
    const float d = LoadHalf(row);
    const float m = LoadHalf(row + 2);
    const uint8_t* qs = row + 4;
    for (int j = 0; j < 16; ++j) {
      acc.Add(j, d * static_cast<float>(qs[j] & 0x0f) + m, x[j]);
      acc.Add(j + 16, d * static_cast<float>(qs[j] >> 4) + m, x[j + 16]);
    }
  }
  return acc.Sum();
}

// q5_0: fifth bit of value i is bit i of the little-endian u32 qh; x = d * (q - 16).
float DotQ5_0(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 22, x += 32) {
    const float d = LoadHalf(row);
    const uint32_t qh = LoadU32(row + 2);
    const uint8_t* qs = row + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      acc.Add(j, d * static_cast<float>(lo - 16), x[j]);
      acc.Add(j + 16, d * static_cast<float>(hi - 16), x[j + 16]);
    }
  }
  return acc.Sum();
}

// q5_1: x = d * q + m.
float DotQ5_1(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 24, x += 32) {
    const float d = LoadHalf(row);
    const float m = LoadHalf(row + 2);
    const uint32_t qh = LoadU32(row + 4);
    const uint8_t* qs = row + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      acc.Add(j, d * static_cast<float>(lo) + m, x[j]);
      acc.Add(j + 16, d * static_cast<float>(hi) + m, x[j + 16]);
    }
  }
  return acc.Sum();
}

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

// q4_k: 8 sub-blocks of 32; 32-byte run `pair` of qs holds sub-block 2 * pair in its low nibbles
// and 2 * pair + 1 in its high nibbles; x = d*scale * q - dmin*min.
float DotQ4_K(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 144, x += 256) {
    const float d = LoadHalf(row);
    const float dmin = LoadHalf(row + 2);
    const uint8_t* scales = row + 4;
    const uint8_t* qs = row + 16;
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      const uint8_t* q = qs + 32 * pair;
      const float* xp = x + 64 * pair;
      for (int l = 0; l < 32; ++l) {
        acc.Add(l, d0 * static_cast<float>(q[l] & 0x0f) - min0, xp[l]);
        acc.Add(l + 32, d1 * static_cast<float>(q[l] >> 4) - min1, xp[l + 32]);
      }
    }
  }
  return acc.Sum();
}

// q5_k: q4_k plus a fifth bit: bit s of qh[l] is the high bit of value l of sub-block s.
float DotQ5_K(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 176, x += 256) {
    const float d = LoadHalf(row);
    const float dmin = LoadHalf(row + 2);
    const uint8_t* scales = row + 4;
    const uint8_t* qh = row + 16;
    const uint8_t* qs = row + 48;
    for (int pair = 0; pair < 4; ++pair) {
      int sc0, m0, sc1, m1;
      KQuantScaleMin(scales, 2 * pair, &sc0, &m0);
      KQuantScaleMin(scales, 2 * pair + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      const int bit0 = 2 * pair, bit1 = 2 * pair + 1;
      const uint8_t* q = qs + 32 * pair;
      const float* xp = x + 64 * pair;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0f) | (((qh[l] >> bit0) & 1) << 4);
        const int hi = (q[l] >> 4) | (((qh[l] >> bit1) & 1) << 4);
        acc.Add(l, d0 * static_cast<float>(lo) - min0, xp[l]);
        acc.Add(l + 32, d1 * static_cast<float>(hi) - min1, xp[l + 32]);
      }
    }
  }
  return acc.Sum();
}

// q6_k: two halves of 128; see DecodeQ6_K in dequant_cpu.cc for the bit layout.
float DotQ6_K(const uint8_t* row, const float* x, int64_t n_blocks) {
  Lanes acc;
  for (int64_t b = 0; b < n_blocks; ++b, row += 210, x += 256) {
    const uint8_t* ql_all = row;
    const uint8_t* qh_all = row + 128;
    const int8_t* sc_all = reinterpret_cast<const int8_t*>(row + 192);
    const float d = LoadHalf(row + 208);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = ql_all + 64 * half;
      const uint8_t* qh = qh_all + 32 * half;
      const int8_t* sc = sc_all + 8 * half;
      const float* xp = x + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int group = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        acc.Add(l, d * static_cast<float>(sc[group]) * static_cast<float>(q0), xp[l]);
        acc.Add(l + 32, d * static_cast<float>(sc[group + 2]) * static_cast<float>(q1), xp[l + 32]);
        acc.Add(l + 64, d * static_cast<float>(sc[group + 4]) * static_cast<float>(q2), xp[l + 64]);
        acc.Add(l + 96, d * static_cast<float>(sc[group + 6]) * static_cast<float>(q3), xp[l + 96]);
      }
    }
  }
  return acc.Sum();
}

}  // namespace

GemvRowKernel ScalarGemvKernel(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return DotF32;
    case GgmlType::kF16:
      return DotF16;
    case GgmlType::kBF16:
      return DotBf16;
    case GgmlType::kQ8_0:
      return DotQ8_0;
    case GgmlType::kQ4_0:
      return DotQ4_0;
    case GgmlType::kQ4_1:
      return DotQ4_1;
    case GgmlType::kQ5_0:
      return DotQ5_0;
    case GgmlType::kQ5_1:
      return DotQ5_1;
    case GgmlType::kQ4_K:
      return DotQ4_K;
    case GgmlType::kQ5_K:
      return DotQ5_K;
    case GgmlType::kQ6_K:
      return DotQ6_K;
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
  return nullptr;
}

void GemvRows(GemvRowKernel kernel, const uint8_t* w, int64_t row_bytes, int64_t rows,
              int64_t n_blocks, const float* x, float* y, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1 && rows > 1)
  for (int64_t r = 0; r < rows; ++r) y[r] = kernel(w + r * row_bytes, x, n_blocks);
}

}  // namespace ripplekv::kernels::cpu
