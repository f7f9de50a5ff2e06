// The AVX2 block decoders (kernels/dequant/dequant_avx2.cc) against the portable ones: for every
// type, random blocks with sane, edge-case and non-finite fp16 scales, several block counts,
// unaligned source and destination, the outputs must be equal byte for byte.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequant/dequant_cpu.h"
#include "kernels/dequant/fp16.h"
#include "tests/kernels/ggml_blocks.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {
namespace {


enum class Scales {
  kSane,       // random magnitudes in [1e-3, 10], either sign
  kEdge,       // mostly zero, -0, subnormal, smallest normal, largest finite; some sane
  kNonFinite,  // infinities, quiet and signalling NaNs mixed with sane values
};

uint16_t SaneScale(std::mt19937& rng) {
  std::uniform_real_distribution<float> log10(-3.0f, 1.0f);
  const float magnitude = std::pow(10.0f, log10(rng));
  return FloatToHalf(rng() % 2 ? magnitude : -magnitude);
}

uint16_t PickScale(Scales kind, std::mt19937& rng) {
  static constexpr uint16_t kEdges[] = {
      0x0000, 0x8000,  // +-0
      0x0001, 0x8001,  // smallest subnormals
      0x03ff, 0x0155,  // largest and another subnormal
      0x0400,          // smallest normal
      0x7bff, 0xfbff,  // largest finite, both signs
  };
  static constexpr uint16_t kNonFinites[] = {0x7c00, 0xfc00, 0x7e00, 0xfe00,
                                             0x7c01, 0x7d55, 0xfc3f, 0x7fff};
  switch (kind) {
    case Scales::kSane:
      return SaneScale(rng);
    case Scales::kEdge:
      return rng() % 4 ? kEdges[rng() % std::size(kEdges)] : SaneScale(rng);
    case Scales::kNonFinite:
      return rng() % 2 ? kNonFinites[rng() % std::size(kNonFinites)] : SaneScale(rng);
  }
  return 0;
}

// n_blocks random blocks of `type` (random quants, scales of the given kind), starting one byte
// into the returned buffer so that the data is unaligned.
std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n_blocks, Scales kind, uint32_t seed) {
  const GgmlTypeTraits traits = TraitsOf(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> buf(1 + static_cast<size_t>(n_blocks * traits.block_bytes));
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int offset : ScaleOffsets(type)) {
      const uint16_t h = PickScale(kind, rng);
      std::memcpy(&buf[1 + b * traits.block_bytes + offset], &h, sizeof(h));
    }
  }
  return buf;
}

// Decodes with both implementations into unaligned destinations and compares bytes; on a mismatch
// names the first differing value and both bit patterns.
void ExpectSameBits(GgmlType type, const uint8_t* src, int64_t n_blocks, const std::string& what) {
  const int64_t n = n_blocks * TraitsOf(type).block_elements;
  std::vector<float> scalar(n + 1, 1234.5f), avx2(n + 1, -1234.5f);
  cpu::DequantizeBlocksScalar(type, src, n_blocks, scalar.data() + 1);
  cpu::DequantizeBlocksAvx2(type, src, n_blocks, avx2.data() + 1);
  if (std::memcmp(scalar.data() + 1, avx2.data() + 1, n * sizeof(float)) == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t want = std::bit_cast<uint32_t>(scalar[i + 1]);
    const uint32_t got = std::bit_cast<uint32_t>(avx2[i + 1]);
    if (want != got) {
      ADD_FAILURE() << what << ": value " << i << " (block " << i / TraitsOf(type).block_elements
                    << ") scalar " << scalar[i + 1] << " (0x" << std::hex << want << ") avx2 "
                    << avx2[i + 1] << " (0x" << got << ")";
      return;
    }
  }
}

std::string TypeName(const ::testing::TestParamInfo<GgmlType>& info) {
  return std::string(TraitsOf(info.param).name);
}

class DequantAvx2Test : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!cpu::DequantAvx2Supported()) GTEST_SKIP() << "this CPU lacks AVX2/F16C";
  }
};

TEST_P(DequantAvx2Test, RandomBlocksMatchTheScalarDecoderBitForBit) {
  const GgmlType type = GetParam();
  const bool plain = TraitsOf(type).block_elements == 1;
  // Plain types count single values: cover the 8- and 16-value steps and their tails.
  const std::vector<int64_t> counts =
      plain ? std::vector<int64_t>{1, 3, 7, 8, 15, 16, 17, 33, 1000, 4099}
            : std::vector<int64_t>{1, 3, 1000};
  uint32_t seed = 1;
  for (Scales kind : {Scales::kSane, Scales::kEdge, Scales::kNonFinite}) {
    for (int64_t n_blocks : counts) {
      const std::vector<uint8_t> buf = RandomBlocks(type, n_blocks, kind, seed++);
      ExpectSameBits(type, buf.data() + 1, n_blocks,
                     std::string(TraitsOf(type).name) + " scales " +
                         std::to_string(static_cast<int>(kind)) + ", " + std::to_string(n_blocks) +
                         " blocks");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantAvx2Test, ::testing::ValuesIn(kGgmlTypes), TypeName);

// Every fp16 scale pattern in every scale field: 65536 blocks per field, the other fields random.
using DequantAvx2ScaleTest = DequantAvx2Test;
TEST_P(DequantAvx2ScaleTest, EveryHalfScalePatternMatches) {
  const GgmlType type = GetParam();
  const std::vector<int> offsets = ScaleOffsets(type);
  ASSERT_FALSE(offsets.empty());
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  constexpr int64_t kPatterns = 1 << 16;
  for (int offset : offsets) {
    std::vector<uint8_t> buf = RandomBlocks(type, kPatterns, Scales::kSane, 100 + offset);
    for (int64_t b = 0; b < kPatterns; ++b) {
      const uint16_t h = static_cast<uint16_t>(b);
      std::memcpy(&buf[1 + b * block_bytes + offset], &h, sizeof(h));
    }
    ExpectSameBits(
        type, buf.data() + 1, kPatterns,
        std::string(TraitsOf(type).name) + " scale field at byte " + std::to_string(offset));
  }
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, DequantAvx2ScaleTest,
                         ::testing::ValuesIn(std::begin(kGgmlTypes) + 3, std::end(kGgmlTypes)),
                         TypeName);

// Every 16-bit pattern (NaN payloads, signalling NaNs, subnormals, infinities) as F16 and BF16,
// in runs that start at every phase of the 16-value step.
TEST(DequantAvx2PlainTest, EveryPlainPatternMatches) {
  if (!cpu::DequantAvx2Supported()) GTEST_SKIP() << "this CPU lacks AVX2/F16C";
  constexpr int64_t kPatterns = 1 << 16;
  std::vector<uint8_t> buf(1 + 2 * kPatterns + 64);
  for (int64_t i = 0; i < kPatterns; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(&buf[1 + 2 * i], &h, sizeof(h));
  }
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t phase : {0, 1, 5, 15}) {
      ExpectSameBits(
          type, buf.data() + 1 + 2 * phase, kPatterns - phase,
          std::string(TraitsOf(type).name) + " all patterns from " + std::to_string(phase));
    }
  }
}

// The dispatching entry point gives the scalar decoder's bits whichever implementation it picked.
TEST(DequantAvx2PlainTest, DispatchMatchesTheScalarDecoder) {
  for (GgmlType type : kGgmlTypes) {
    const int64_t n_blocks = 37;
    const std::vector<uint8_t> buf = RandomBlocks(type, n_blocks, Scales::kSane, 7);
    const int64_t n = n_blocks * TraitsOf(type).block_elements;
    std::vector<float> want(n), got(n);
    cpu::DequantizeBlocksScalar(type, buf.data() + 1, n_blocks, want.data());
    cpu::DequantizeBlocks(type, buf.data() + 1, n_blocks, got.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0) << TraitsOf(type).name;
  }
}

}  // namespace
}  // namespace ripplekv::kernels
