#include "kernels/dequant/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/tensor/tensor.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/fp16.h"

namespace ripplekv::kernels {
namespace {

std::vector<uint8_t> Quantize(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(static_cast<size_t>(*GgmlBytes(type, static_cast<int64_t>(x.size()))));
  const Status s = QuantizeRow(type, x, out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> Dequant(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  Tensor out({n});
  const Status s = Dequantize(type, bytes, out.view());
  EXPECT_TRUE(s.ok()) << s;
  return std::vector<float>(out.data(), out.data() + n);
}

// Random values with a wide range of block scales (1e-4 .. 1e3), some blocks all zero.
std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-4.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = b % 17 == 5 ? 0.0f : std::pow(10.0f, exponent(rng));
    for (int j = 0; j < 32; ++j) x[b * 32 + j] = scale * normal(rng);
  }
  return x;
}

float BlockAbsMax(const std::vector<float>& x, int64_t block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[block * 32 + j]));
  return amax;
}

// The most that rounding a scale d to fp16 changes it: half an ulp, relative 2^-11 for normal
// halves, at most 2^-25 absolute in the subnormal range (small blocks get subnormal scales).
float HalfRoundingError(float d) { return d * std::ldexp(1.0f, -11) + std::ldexp(1.0f, -25); }

TEST(QuantizeTest, Q8_0RoundTripIsWithinHalfAStep) {
  const int64_t n = 32 * 512;
  const std::vector<float> x = RandomValues(n, 1);
  const std::vector<float> y = Dequant(GgmlType::kQ8_0, Quantize(GgmlType::kQ8_0, x), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    // Half a step of d = amax / 127, plus the fp16 rounding of d times |q| <= 127.
    const float d = BlockAbsMax(x, b) / 127.0f;
    const float bound = 0.5f * d + 127.0f * HalfRoundingError(d);
    for (int j = 0; j < 32; ++j) {
      ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << "block " << b << " j " << j;
    }
  }
}

TEST(QuantizeTest, Q4_0RoundTripIsWithinOneStep) {
  const int64_t n = 32 * 512;
  const std::vector<float> x = RandomValues(n, 2);
  const std::vector<float> y = Dequant(GgmlType::kQ4_0, Quantize(GgmlType::kQ4_0, x), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    // d = amax / 8. Values on the side of the largest one are off by at most d / 2; on the other
    // side ggml clamps +8 to +7, so up to one step d. Plus fp16 rounding of d times |q - 8| <= 8.
    const float d = BlockAbsMax(x, b) / 8.0f;
    const float bound = d + 8.0f * HalfRoundingError(d);
    for (int j = 0; j < 32; ++j) {
      ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << "block " << b << " j " << j;
    }
  }
}

TEST(QuantizeTest, Q4_0KnownBlockMatchesGgmlReference) {
  // Largest magnitude -16 at j = 3: d = -16 / -8 = 2, q = trunc(x / 2 + 8.5) clamped to 15.
  std::vector<float> x(32, 0.0f);
  x[3] = -16.0f;
  x[4] = 16.0f;   // +8 steps: clamped to nibble 15 (value 14)
  x[5] = 3.0f;    // 1.5 steps + 8.5 = 10 -> nibble 10 (value 4): ggml rounds half up
  x[20] = -1.0f;  // -0.5 + 8.5 = 8 -> nibble 8 (value 0)
  const std::vector<uint8_t> q = Quantize(GgmlType::kQ4_0, x);
  ASSERT_EQ(q.size(), 18u);
  EXPECT_EQ(q[0] | (q[1] << 8), FloatToHalf(2.0f));
  EXPECT_EQ(q[2 + 3] & 0x0f, 0);
  EXPECT_EQ(q[2 + 4] & 0x0f, 15);
  EXPECT_EQ(q[2 + 5] & 0x0f, 10);
  EXPECT_EQ(q[2 + 4] >> 4, 8);  // x[20]
  EXPECT_EQ(q[2 + 0] & 0x0f, 8);
  // The same magnitude on the positive side first: the sign of the first maximum wins.
  std::vector<float> z(32, 0.0f);
  z[0] = 4.0f;
  z[1] = -4.0f;
  const std::vector<uint8_t> r = Quantize(GgmlType::kQ4_0, z);
  EXPECT_EQ(r[0] | (r[1] << 8), FloatToHalf(-0.5f));
  EXPECT_EQ(r[2] & 0x0f, 0);   // 4 / -0.5 + 8.5 = 0.5 -> 0
  EXPECT_EQ(r[3] & 0x0f, 15);  // -4 / -0.5 + 8.5 = 16.5 -> clamped
}

TEST(QuantizeTest, Q8_0KnownBlockMatchesGgmlReference) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -63.5f;  // half away from zero: -64
  x[2] = 0.49f;
  const std::vector<uint8_t> q = Quantize(GgmlType::kQ8_0, x);
  ASSERT_EQ(q.size(), 34u);
  EXPECT_EQ(q[0] | (q[1] << 8), FloatToHalf(1.0f));
  EXPECT_EQ(static_cast<int8_t>(q[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[3]), -64);
  EXPECT_EQ(static_cast<int8_t>(q[4]), 0);
}

// A random fp16 scale: normal, finite, in [2^-10, 2^10), with the given sign.
uint16_t RandomScale(std::mt19937& rng, bool negative) {
  std::uniform_int_distribution<int> exponent(5, 24);  // biased exponent: 2^-10 .. 2^9
  std::uniform_int_distribution<int> mantissa(0, 1023);
  return static_cast<uint16_t>((negative ? 0x8000 : 0) | (exponent(rng) << 10) | mantissa(rng));
}

TEST(QuantizeTest, Q4_0RequantizesItsOwnBlocksExactly) {
  // A block the quantizer can produce has its largest magnitude at nibble 0 (value -8 d): make
  // random blocks of that form, with either sign of d.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> nibble(0, 15), position(0, 31);
  const int blocks = 4096;
  std::vector<uint8_t> q(static_cast<size_t>(blocks) * 18);
  for (int b = 0; b < blocks; ++b) {
    uint8_t* block = q.data() + b * 18;
    const uint16_t d = RandomScale(rng, b % 2 == 1);
    block[0] = static_cast<uint8_t>(d & 0xff);
    block[1] = static_cast<uint8_t>(d >> 8);
    int values[32];
    for (int& v : values) v = nibble(rng);
    values[position(rng)] = 0;
    for (int j = 0; j < 16; ++j)
      block[2 + j] = static_cast<uint8_t>(values[j] | (values[j + 16] << 4));
  }
  const int64_t n = int64_t{blocks} * 32;
  EXPECT_EQ(Quantize(GgmlType::kQ4_0, Dequant(GgmlType::kQ4_0, q, n)), q);
}

TEST(QuantizeTest, Q8_0RequantizesItsOwnBlocksExactly) {
  // d > 0 and some |q| == 127, as d = amax / 127 gives.
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> value(-127, 127), position(0, 31);
  const int blocks = 4096;
  std::vector<uint8_t> q(static_cast<size_t>(blocks) * 34);
  for (int b = 0; b < blocks; ++b) {
    uint8_t* block = q.data() + b * 34;
    const uint16_t d = RandomScale(rng, false);
    block[0] = static_cast<uint8_t>(d & 0xff);
    block[1] = static_cast<uint8_t>(d >> 8);
    for (int j = 0; j < 32; ++j)
      block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(value(rng)));
    block[2 + position(rng)] = static_cast<uint8_t>(static_cast<int8_t>(b % 2 ? 127 : -127));
  }
  const int64_t n = int64_t{blocks} * 32;
  EXPECT_EQ(Quantize(GgmlType::kQ8_0, Dequant(GgmlType::kQ8_0, q, n)), q);
}

TEST(QuantizeTest, HalfFormatsRoundTripEveryValue) {
  std::vector<uint8_t> halves, bf16s;
  std::vector<float> from_half, from_bf16;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7C00) == 0x7C00 && (v & 0x03FF) != 0) continue;  // NaN payloads: not canonical
    halves.push_back(static_cast<uint8_t>(v & 0xff));
    halves.push_back(static_cast<uint8_t>(v >> 8));
    from_half.push_back(HalfToFloat(v));
    if ((v & 0x7F80) == 0x7F80 && (v & 0x007F) != 0) continue;  // bf16 NaN
    bf16s.push_back(static_cast<uint8_t>(v & 0xff));
    bf16s.push_back(static_cast<uint8_t>(v >> 8));
    from_bf16.push_back(Bf16ToFloat(v));
  }
  EXPECT_EQ(Quantize(GgmlType::kF16, from_half), halves);
  EXPECT_EQ(Quantize(GgmlType::kBF16, from_bf16), bf16s);
  const std::vector<float> x = RandomValues(64, 5);
  EXPECT_EQ(Dequant(GgmlType::kF32, Quantize(GgmlType::kF32, x), 64), x);
}

TEST(QuantizeTest, RejectsBadSizesAndTypes) {
  std::vector<float> x(40, 1.0f);
  std::vector<uint8_t> out(100);
  Status s = QuantizeRow(GgmlType::kQ4_0, x, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;  // 40 is not whole blocks
  std::vector<float> y(32, 1.0f);
  s = QuantizeRow(GgmlType::kQ4_0, y, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;  // 100 != 18 bytes
  EXPECT_NE(s.message().find("18"), std::string_view::npos) << s;
  s = QuantizeRow(GgmlType::kQ6_K, std::vector<float>(256, 1.0f), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("q6_k"), std::string_view::npos) << s;
  EXPECT_FALSE(CanQuantize(GgmlType::kQ4_1));
  EXPECT_TRUE(CanQuantize(GgmlType::kQ4_0));
}

}  // namespace
}  // namespace ripplekv::kernels
