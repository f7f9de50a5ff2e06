#include "kernels/dequant/dequant.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "kernels/dequant/fp16.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {
namespace {

// fp16 bit patterns of the scales used below (all exact powers of two or small integers).
constexpr uint16_t kHalfOne = 0x3C00;       // 1.0
constexpr uint16_t kHalfTwo = 0x4000;       // 2.0
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;   // 0.25
constexpr uint16_t kHalfMinusOne = 0xBC00;  // -1.0
constexpr uint16_t kHalfEighth = 0x3000;    // 0.125
constexpr uint16_t kHalfThree = 0x4200;     // 3.0

void PutHalf(std::vector<uint8_t>& b, size_t at, uint16_t h) {
  b[at] = static_cast<uint8_t>(h & 0xff);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

std::vector<float> Decode(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  Tensor out({n});
  Status s = Dequantize(type, bytes, out.view());
  EXPECT_TRUE(s.ok()) << s;
  return std::vector<float>(out.data(), out.data() + n);
}

// ---------------------------------------------------------------- fp16 / bf16

TEST(Fp16Test, KnownHalfValuesDecodeExactly) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));            // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));            // smallest normal
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x8000), 0.0f);
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));  // signalling NaN stays NaN
}

TEST(Fp16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << "h=0x" << h;
  }
}

TEST(Fp16Test, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, down to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, up to even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.1f, -11)), 0x3C01);      // above the tie
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);                          // below the overflow tie
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);                          // rounds to infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);     // tie between 0 and 1 unit
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0001f, -25)), 0x0001);  // just above it
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -24)), 0x0002);     // tie between 1 and 2 units
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal carries to normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);  // sign survives underflow
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A NaN whose payload lives only in the low float bits must not become infinity.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::bit_cast<float>(0x7F800001u)))));
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
TEST(Fp16Test, FloatToHalfMatchesCompilerConversion) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    // Exponents concentrated around the half range, where rounding matters.
    uint32_t x = bits(rng);
    x = (x & 0x807FFFFFu) | ((100u + (x >> 23) % 60u) << 23);
    const float f = std::bit_cast<float>(x);
    const _Float16 reference = static_cast<_Float16>(f);
    EXPECT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(reference)) << std::hexfloat << f;
  }
}
#endif

TEST(Bf16Test, EveryBf16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    const uint16_t back = FloatToBf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(back)));
      EXPECT_EQ(back & 0x8000, b & 0x8000);
    } else {
      EXPECT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(Bf16Test, FloatToBf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);        // tie, down to even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);    // tie, up to even
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.5f, -8)), 0x3F81);        // above the tie
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.5f, -9)), 0x3F80);        // below the tie
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to infinity
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(Bf16ToFloat(0x0001), std::bit_cast<float>(0x00010000u));  // bf16 subnormal
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::bit_cast<float>(0x7F800001u)))));
}

// ---------------------------------------------------------------- plain types

TEST(DequantTest, F32IsCopiedBitExactly) {
  const std::vector<float> values = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), 3e-40f};
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const std::vector<float> out = Decode(GgmlType::kF32, bytes, 4);
  EXPECT_EQ(std::memcmp(out.data(), values.data(), bytes.size()), 0);
}

TEST(DequantTest, F16AndBf16DecodeLittleEndianValues) {
  std::vector<uint8_t> f16 = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x7C};
  EXPECT_EQ(Decode(GgmlType::kF16, f16, 4),
            (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24),
                                std::numeric_limits<float>::infinity()}));
  std::vector<uint8_t> bf16 = {0x80, 0x3F, 0x40, 0xC0};
  EXPECT_EQ(Decode(GgmlType::kBF16, bf16, 2), (std::vector<float>{1.0f, -3.0f}));
}

// The whole-array F16/BF16 decode that model loaders use (safetensors data need not be 2-byte
// aligned): every 16-bit pattern, from an odd address, in a 2-D tensor, decodes bit for bit as the
// scalar HalfToFloat / Bf16ToFloat do (NaN payloads included).
TEST(DequantTest, F16AndBf16ArraysFromUnalignedMemoryMatchTheScalarConversion) {
  constexpr int64_t kPatterns = 1 << 16;
  std::vector<uint8_t> storage(1 + 2 * kPatterns);
  for (int64_t i = 0; i < kPatterns; ++i) PutHalf(storage, 1 + 2 * i, static_cast<uint16_t>(i));
  const std::span<const uint8_t> src(storage.data() + 1, 2 * kPatterns);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    Tensor out({256, 256});
    ASSERT_TRUE(Dequantize(type, src, out.view()).ok());
    for (int64_t i = 0; i < kPatterns; ++i) {
      const uint16_t h = static_cast<uint16_t>(i);
      const float want = type == GgmlType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
      ASSERT_EQ(std::bit_cast<uint32_t>(out.data()[i]), std::bit_cast<uint32_t>(want))
          << TraitsOf(type).name << " pattern " << i;
    }
  }
}

// ---------------------------------------------------------------- 32-value blocks

TEST(DequantTest, Q8_0IsScaleTimesSignedByte) {
  std::vector<uint8_t> b(34);
  PutHalf(b, 0, kHalfHalf);
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i * 8 - 128));
  const std::vector<float> y = Decode(GgmlType::kQ8_0, b, 32);
  EXPECT_EQ(y[0], -64.0f);  // 0.5 * -128
  EXPECT_EQ(y[16], 0.0f);   // 0.5 * 0
  EXPECT_EQ(y[31], 60.0f);  // 0.5 * 120
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.5f * static_cast<float>(i * 8 - 128)) << i;
}

TEST(DequantTest, Q4_0LowNibblesAreFirstHalfHighNibblesSecondHalf) {
  std::vector<uint8_t> b(18);
  PutHalf(b, 0, kHalfTwo);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Decode(GgmlType::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -16.0f);   // 2 * (0 - 8)
  EXPECT_EQ(y[15], 14.0f);   // 2 * (15 - 8)
  EXPECT_EQ(y[16], 14.0f);   // high nibble of byte 0 is 15
  EXPECT_EQ(y[31], -16.0f);  // high nibble of byte 15 is 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8));
    EXPECT_EQ(y[j + 16], 2.0f * (7 - j));
  }
}

TEST(DequantTest, Q4_1AddsTheMinimum) {
  std::vector<uint8_t> b(20);
  PutHalf(b, 0, kHalfQuarter);
  PutHalf(b, 2, kHalfMinusOne);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (j << 4));
  const std::vector<float> y = Decode(GgmlType::kQ4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[4], 0.0f);    // 0.25 * 4 - 1
  EXPECT_EQ(y[31], 2.75f);  // 0.25 * 15 - 1
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * j - 1.0f);
    EXPECT_EQ(y[j + 16], 0.25f * j - 1.0f);
  }
}

TEST(DequantTest, Q5_0TakesTheFifthBitFromQh) {
  std::vector<uint8_t> b(22);
  PutHalf(b, 0, kHalfOne);
  // qh (little-endian u32): bit i is the fifth bit of value i. Set bits 0, 3, 16 and 31.
  const uint32_t qh = (1u << 0) | (1u << 3) | (1u << 16) | (1u << 31);
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(5 | (10 << 4));
  const std::vector<float> y = Decode(GgmlType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 5.0f);    // (5 | 16) - 16
  EXPECT_EQ(y[1], -11.0f);  // 5 - 16
  EXPECT_EQ(y[3], 5.0f);
  EXPECT_EQ(y[16], 10.0f);  // (10 | 16) - 16
  EXPECT_EQ(y[17], -6.0f);  // 10 - 16
  EXPECT_EQ(y[31], 10.0f);
  for (int i = 0; i < 32; ++i) {
    const int nibble = i < 16 ? 5 : 10;
    const int q = nibble | (((qh >> i) & 1) << 4);
    EXPECT_EQ(y[i], static_cast<float>(q - 16)) << i;
  }
}

TEST(DequantTest, Q5_1UsesScaleAndMinimumWithoutOffset) {
  std::vector<uint8_t> b(24);
  PutHalf(b, 0, kHalfHalf);
  PutHalf(b, 2, kHalfThree);
  const uint32_t qh = 0xFFFF0000u;  // second half gets the fifth bit
  std::memcpy(&b[4], &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | (j << 4));
  const std::vector<float> y = Decode(GgmlType::kQ5_1, b, 32);
  EXPECT_EQ(y[0], 3.0f);    // 0.5 * 0 + 3
  EXPECT_EQ(y[15], 10.5f);  // 0.5 * 15 + 3
  EXPECT_EQ(y[16], 11.0f);  // 0.5 * 16 + 3
  EXPECT_EQ(y[31], 18.5f);  // 0.5 * 31 + 3
}

// ---------------------------------------------------------------- K-quants

// Packs eight 6-bit scales and mins the way the GGML documentation describes for q4_k/q5_k:
// sub-blocks 0-3 use the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep
// their low 4 bits in bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits in the
// top bits of bytes 0-3 (scales) and 4-7 (mins).
std::array<uint8_t, 12> PackKScales(const std::array<int, 8>& sc, const std::array<int, 8>& mn) {
  std::array<uint8_t, 12> p{};
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  return p;
}

// Value i of a q4_k/q5_k super-block lives in sub-block i / 32; pairs of sub-blocks share 32
// bytes of qs (even sub-block: low nibble, odd: high nibble).
void PutK4Nibble(uint8_t* qs, int i, int q) {
  const int sub = i / 32, l = i % 32;
  uint8_t& byte = qs[32 * (sub / 2) + l];
  byte = static_cast<uint8_t>(sub % 2 ? (byte & 0x0F) | (q << 4) : (byte & 0xF0) | q);
}

TEST(DequantTest, Q4_KUnpacksSixBitScalesAndMins) {
  const std::array<int, 8> sc = {1, 2, 3, 63, 17, 33, 48, 63};
  const std::array<int, 8> mn = {0, 5, 63, 1, 16, 31, 47, 62};
  std::vector<uint8_t> b(144);
  PutHalf(b, 0, kHalfHalf);    // d
  PutHalf(b, 2, kHalfEighth);  // dmin
  const auto packed = PackKScales(sc, mn);
  std::copy(packed.begin(), packed.end(), b.begin() + 4);
  for (int i = 0; i < 256; ++i) PutK4Nibble(&b[16], i, (i * 7) % 16);
  const std::vector<float> y = Decode(GgmlType::kQ4_K, b, 256);
  EXPECT_EQ(y[0], 0.0f);          // 0.5*1*0 - 0.125*0
  EXPECT_EQ(y[1], 0.5f * 1 * 7);  // q = 7
  EXPECT_EQ(y[96], -0.125f);      // sub-block 3 (scale 63, min 1), q = 0
  EXPECT_EQ(y[255], 275.75f);     // sub-block 7 (scale 63, min 62), q = 9: 283.5 - 7.75
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    const float want = 0.5f * static_cast<float>(sc[s]) * static_cast<float>((i * 7) % 16) -
                       0.125f * static_cast<float>(mn[s]);
    EXPECT_EQ(y[i], want) << i;
  }
}

TEST(DequantTest, Q5_KTakesBitSubBlockOfQhAsFifthBit) {
  const std::array<int, 8> sc = {2, 4, 6, 8, 10, 12, 14, 16};
  const std::array<int, 8> mn = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint8_t> b(176);
  PutHalf(b, 0, kHalfQuarter);
  PutHalf(b, 2, kHalfOne);
  const auto packed = PackKScales(sc, mn);
  std::copy(packed.begin(), packed.end(), b.begin() + 4);
  uint8_t* qh = &b[16];
  uint8_t* qs = &b[48];
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 11 + 3) % 32;
    PutK4Nibble(qs, i, q[i] & 15);
    if (q[i] & 16) qh[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
  }
  const std::vector<float> y = Decode(GgmlType::kQ5_K, b, 256);
  EXPECT_EQ(y[0], 0.25f * 2 * 3 - 1.0f);   // q = 3
  EXPECT_EQ(y[3], 0.25f * 2 * 4 - 1.0f);   // q = 36 % 32 = 4
  EXPECT_EQ(y[2], 0.25f * 2 * 25 - 1.0f);  // q = 25 (fifth bit set)
  EXPECT_EQ(y[255], 88.0f);                // sub-block 7: 0.25 * 16 * 24 - 1 * 8
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], 0.25f * static_cast<float>(sc[s]) * static_cast<float>(q[i]) -
                        1.0f * static_cast<float>(mn[s]))
        << i;
  }
}

TEST(DequantTest, Q6_KCombinesLowNibbleAndTwoHighBits) {
  std::vector<uint8_t> b(210);
  uint8_t* ql = &b[0];
  uint8_t* qh = &b[128];
  int8_t sc[16];
  for (int k = 0; k < 16; ++k) sc[k] = static_cast<int8_t>(k % 2 ? -(k + 1) : k + 1);
  std::memcpy(&b[192], sc, 16);
  PutHalf(b, 208, kHalfEighth);
  // Value i: half h = i / 128, quarter t = (i % 128) / 32, l = i % 32. Low 4 bits in
  // ql[64h + l + 32*(t % 2)] (low nibble for t < 2, high for t >= 2); high 2 bits at bit 2t of
  // qh[32h + l]; scale sc[8h + l / 16 + 2t]; value = d * scale * (q - 32).
  std::vector<int> q(256);
  std::vector<int> scale_of(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 13 + 5) % 64;
    const int h = i / 128, t = (i % 128) / 32, l = i % 32;
    uint8_t& low = ql[64 * h + l + 32 * (t % 2)];
    low |= static_cast<uint8_t>(t < 2 ? (q[i] & 15) : (q[i] & 15) << 4);
    qh[32 * h + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * t));
    scale_of[i] = sc[8 * h + l / 16 + 2 * t];
  }
  const std::vector<float> y = Decode(GgmlType::kQ6_K, b, 256);
  EXPECT_EQ(y[0], -3.375f);    // q = 5, scale sc[0] = 1: 0.125 * 1 * (5 - 32)
  EXPECT_EQ(y[16], 2.75f);     // q = 21, scale sc[1] = -2: 0.125 * -2 * (21 - 32)
  EXPECT_EQ(y[200], 21.125f);  // q = 45, scale sc[12] = 13: 0.125 * 13 * (45 - 32)
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(y[i], 0.125f * static_cast<float>(scale_of[i]) * static_cast<float>(q[i] - 32)) << i;
  }
}

// ---------------------------------------------------------------- front end

TEST(DequantTest, GgmlBytesChecksWholeBlocksAndOverflow) {
  EXPECT_EQ(*GgmlBytes(GgmlType::kQ4_1, 64), 40);
  EXPECT_EQ(*GgmlBytes(GgmlType::kQ6_K, 512), 420);
  EXPECT_EQ(*GgmlBytes(GgmlType::kF16, 3), 6);
  EXPECT_EQ(GgmlBytes(GgmlType::kQ4_0, 33).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgmlBytes(GgmlType::kF32, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgmlBytes(GgmlType::kF32, std::numeric_limits<int64_t>::max()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DequantTest, RejectsWrongSourceSize) {
  Tensor out({2, 32});
  std::vector<uint8_t> bytes(2 * 18 - 1);
  Status s = Dequantize(GgmlType::kQ4_0, bytes, out.view());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs 36 bytes, got 35"), std::string_view::npos) << s;
}

TEST(DequantTest, RejectsRowsThatSplitABlock) {
  Tensor out({32, 16});  // 512 values = 16 blocks, but a 16-value row would split each block
  std::vector<uint8_t> bytes(16 * 18);
  Status s = Dequantize(GgmlType::kQ4_0, bytes, out.view());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("whole number"), std::string_view::npos) << s;
}

TEST(DequantTest, CudaDestinationIsUnimplementedForNow) {
  float dummy[32];
  TensorView view{dummy, {32}, Device::kCuda};
  std::vector<uint8_t> bytes(128);
  EXPECT_EQ(Dequantize(GgmlType::kF32, bytes, view).code(), absl::StatusCode::kUnimplemented);
}

TEST(DequantTest, ThreadedDecodeMatchesRowByRowDecode) {
  // 600 rows x 512 values of q4_k: large enough to take the OpenMP path.
  const int64_t rows = 600, cols = 512;
  const int64_t row_bytes = *GgmlBytes(GgmlType::kQ4_K, cols);
  std::vector<uint8_t> bytes(rows * row_bytes);
  std::mt19937 rng(1);
  for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
  // Keep the fp16 scales finite so the comparison is meaningful.
  for (int64_t blk = 0; blk < rows * cols / 256; ++blk) {
    bytes[blk * 144 + 1] &= 0x3B;
    bytes[blk * 144 + 3] &= 0x3B;
  }
  Tensor all({rows, cols});
  ASSERT_TRUE(Dequantize(GgmlType::kQ4_K, bytes, all.view()).ok());
  for (int64_t r = 0; r < rows; ++r) {
    Tensor one({cols});
    std::span<const uint8_t> src(bytes.data() + r * row_bytes, row_bytes);
    ASSERT_TRUE(Dequantize(GgmlType::kQ4_K, src, one.view()).ok());
    ASSERT_EQ(std::memcmp(one.data(), all.data() + r * cols, cols * sizeof(float)), 0) << r;
  }
}

// ---------------------------------------------------------------- type table

TEST(GgmlTypesTest, TraitsMatchBlockStructSizes) {
  EXPECT_EQ(TraitsOf(GgmlType::kQ4_0).block_bytes, 18);
  EXPECT_EQ(TraitsOf(GgmlType::kQ4_1).block_bytes, 20);
  EXPECT_EQ(TraitsOf(GgmlType::kQ5_0).block_bytes, 22);
  EXPECT_EQ(TraitsOf(GgmlType::kQ5_1).block_bytes, 24);
  EXPECT_EQ(TraitsOf(GgmlType::kQ8_0).block_bytes, 34);
  EXPECT_EQ(TraitsOf(GgmlType::kQ4_K).block_bytes, 144);
  EXPECT_EQ(TraitsOf(GgmlType::kQ5_K).block_bytes, 176);
  EXPECT_EQ(TraitsOf(GgmlType::kQ6_K).block_bytes, 210);
  EXPECT_EQ(TraitsOf(GgmlType::kQ6_K).block_elements, 256);
  EXPECT_EQ(TraitsOf(GgmlType::kBF16).name, "bf16");
}

TEST(GgmlTypesTest, RawIdsOfUnsupportedAndUnknownTypesAreErrors) {
  EXPECT_EQ(TraitsOf(3u)->name, "q4_1");
  StatusOr<GgmlTypeTraits> q2k = TraitsOf(10u);
  EXPECT_EQ(q2k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(q2k.status().message().find("q2_k"), std::string_view::npos);
  StatusOr<GgmlTypeTraits> unknown = TraitsOf(99u);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("99"), std::string_view::npos);
}

}  // namespace
}  // namespace ripplekv::kernels
