// The device's weight expansion (kernels/ops/cuda/upload.cu, cuda/upload.h DequantizeRows)
// against the CPU's dequantization (kernels/dequant/dequant.h): for every GGML type, fp32 output
// equal bit for bit and bf16 output equal to the CPU value rounded to nearest even (fp16.h
// FloatToBf16), over single rows, several rows, rows of many blocks, an empty tensor, a tensor
// larger than one grid and an unaligned source. Calls the CUDA backend directly, so it is built
// only where the backend is (RIPPLEKV_TEST_HAVE_CUDA); without a device every case skips.

#if defined(RIPPLEKV_TEST_HAVE_CUDA)

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequant/dequant.h"
#include "kernels/dequant/fp16.h"
#include "kernels/dequant/ggml_types.h"
#include "kernels/dequant/quantize.h"
#include "kernels/ops/cuda/cuda_device.h"
#include "kernels/ops/cuda/upload.h"
#include "tests/kernels/backend_ops_fixture.h"
#include "tests/kernels/ggml_blocks.h"

namespace ripplekv::kernels {
namespace {

// A block of device memory, freed with the allocator that gave it.
class DeviceBytes {
 public:
  DeviceBytes(Allocator& allocator, size_t bytes)
      : allocator_(allocator), data_(allocator.Allocate(bytes == 0 ? 1 : bytes)) {}
  ~DeviceBytes() { allocator_.Free(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(data_); }

 private:
  Allocator& allocator_;
  void* data_;
};

uint16_t SaneHalf(std::mt19937& rng) {
  std::uniform_real_distribution<float> log10(-3.0f, 1.0f);
  const float magnitude = std::pow(10.0f, log10(rng));
  return FloatToHalf(rng() % 2 ? magnitude : -magnitude);
}

// A [rows, cols] tensor of `type`: normal values through the reference quantizer where quantize.h
// writes the type; otherwise random bytes (every quant, K-quant sub-block scale and F16/BF16
// pattern, NaNs included) with fp16 block scales of realistic size.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(*GgmlBytes(type, rows * cols)));
  if (CanQuantize(type)) {
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> values(static_cast<size_t>(rows * cols));
    for (float& v : values) v = normal(rng);
    const Status s = QuantizeRow(type, values, bytes);
    EXPECT_TRUE(s.ok()) << s;
    return bytes;
  }
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const auto block_bytes = static_cast<size_t>(TraitsOf(type).block_bytes);
  for (size_t at = 0; at < bytes.size(); at += block_bytes) {
    for (int offset : ScaleOffsets(type)) {
      const uint16_t h = SaneHalf(rng);
      std::memcpy(&bytes[at + offset], &h, sizeof(h));
    }
  }
  return bytes;
}

// How strictly device values must match: every bit, or every bit except a NaN's payload (a NaN
// that the arithmetic makes from a non-finite scale is the canonical one on the device).
enum class Match { kBits, kBitsOrBothNan };

bool Same(uint32_t want, uint32_t got, Match match) {
  if (want == got) return true;
  return match == Match::kBitsOrBothNan && std::isnan(std::bit_cast<float>(want)) &&
         std::isnan(std::bit_cast<float>(got));
}

// Expands `bytes` ([rows, cols] of `type`) on the CPU and on the device, the device reading them
// `offset` bytes into its buffer, in fp32 and in bf16; the first mismatch of each is reported.
void ExpectDeviceMatchesCpu(const OpContext& ctx, Allocator& device, GgmlType type,
                            const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols,
                            size_t offset, Match match, const std::string& what) {
  const int64_t n = rows * cols;
  Tensor want({rows, cols});
  const Status s = Dequantize(type, bytes, want.view());
  ASSERT_TRUE(s.ok()) << s;
  std::vector<uint32_t> want_f32(static_cast<size_t>(n));
  std::memcpy(want_f32.data(), want.raw(), want_f32.size() * sizeof(uint32_t));

  DeviceBytes src(device, offset + bytes.size());
  if (!bytes.empty()) device.CopyFromHost(src.get() + offset, bytes.data(), bytes.size());
  const auto raw_type = static_cast<uint32_t>(type);
  for (const bool to_bf16 : {false, true}) {
    const size_t out_bytes = static_cast<size_t>(n) * (to_bf16 ? 2 : 4);
    DeviceBytes out(device, out_bytes);
    ASSERT_EQ(
        cuda::DequantizeRows(ctx, raw_type, src.get() + offset, rows, cols, to_bf16, out.get()),
        0);
    std::string why;
    ASSERT_TRUE(cuda::Synchronize(ctx, &why)) << why;
    if (to_bf16) {
      std::vector<uint16_t> got(static_cast<size_t>(n));
      device.CopyToHost(got.data(), out.get(), out_bytes);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t expected = FloatToBf16(std::bit_cast<float>(want_f32[i]));
        if (!Same(uint32_t{expected} << 16, uint32_t{got[i]} << 16, match)) {
          ADD_FAILURE() << what << " bf16: value " << i << " want 0x" << std::hex << expected
                        << " got 0x" << got[i];
          break;
        }
      }
    } else {
      std::vector<uint32_t> got(static_cast<size_t>(n));
      device.CopyToHost(got.data(), out.get(), out_bytes);
      for (int64_t i = 0; i < n; ++i) {
        if (!Same(want_f32[i], got[i], match)) {
          ADD_FAILURE() << what << " f32: value " << i << " want "
                        << std::bit_cast<float>(want_f32[i]) << " (0x" << std::hex << want_f32[i]
                        << ") got " << std::bit_cast<float>(got[i]) << " (0x" << got[i] << ")";
          break;
        }
      }
    }
  }
}

std::string Describe(GgmlType type, int64_t rows, int64_t cols, size_t offset) {
  return std::string(TraitsOf(type).name) + " [" + std::to_string(rows) + ", " +
         std::to_string(cols) + "] at offset " + std::to_string(offset);
}

TEST_F(BackendOpsTest, DequantizeRowsEqualsTheCpuForEveryTypeAndShape) {
  // Rows x blocks per row: one block, several rows, long rows, many rows (hundreds of thread
  // blocks), and no rows.
  const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},  {5, 1},    {3, 4},
                                                            {2, 48}, {257, 12}, {0, 2}};
  uint32_t seed = 1;
  for (const GgmlType type : kGgmlTypes) {
    for (const auto& [rows, blocks] : kShapes) {
      const int64_t cols = blocks * TraitsOf(type).block_elements;
      const std::vector<uint8_t> bytes = RandomWeights(type, rows, cols, seed++);
      for (const size_t offset : {size_t{0}, size_t{1}}) {
        ExpectDeviceMatchesCpu(cuda(), *device_, type, bytes, rows, cols, offset, Match::kBits,
                               Describe(type, rows, cols, offset));
      }
    }
  }
}

// More values than one grid covers (65536 blocks of 256 threads), so threads take several.
TEST_F(BackendOpsTest, DequantizeRowsCoversTensorsLargerThanOneGrid) {
  constexpr int64_t kRows = 4100, kCols = 4096;
  static_assert(kRows * kCols > (int64_t{1} << 24));
  for (const GgmlType type : {GgmlType::kQ6_K, GgmlType::kQ4_0}) {
    const std::vector<uint8_t> bytes = RandomWeights(type, kRows, kCols, 77);
    ExpectDeviceMatchesCpu(cuda(), *device_, type, bytes, kRows, kCols, 0, Match::kBits,
                           Describe(type, kRows, kCols, 0));
  }
}

// Every fp16 pattern in every scale field of every quantized type (zeros, subnormals, the largest
// finite values, infinities, NaNs): the same bits, except the payload of a NaN the arithmetic made.
TEST_F(BackendOpsTest, DequantizeRowsEqualsTheCpuForEveryHalfScalePattern) {
  constexpr int64_t kPatterns = 1 << 16, kRows = 64;
  for (auto type = std::begin(kGgmlTypes) + 3; type != std::end(kGgmlTypes); ++type) {
    const GgmlTypeTraits traits = TraitsOf(*type);
    const int64_t cols = kPatterns / kRows * traits.block_elements;
    for (const int offset : ScaleOffsets(*type)) {
      std::vector<uint8_t> bytes = RandomWeights(*type, kRows, cols, 100 + offset);
      for (int64_t b = 0; b < kPatterns; ++b) {
        const auto h = static_cast<uint16_t>(b);
        std::memcpy(&bytes[b * traits.block_bytes + offset], &h, sizeof(h));
      }
      ExpectDeviceMatchesCpu(cuda(), *device_, *type, bytes, kRows, cols, 0, Match::kBitsOrBothNan,
                             std::string(traits.name) + " scale at byte " + std::to_string(offset));
    }
  }
}

// Stored F16 and BF16 values, every pattern, and F32 values of random bits: NaN payloads,
// signalling NaNs, subnormals and infinities come through with all their bits.
TEST_F(BackendOpsTest, DequantizeRowsKeepsEveryBitOfPlainValues) {
  constexpr int64_t kPatterns = 1 << 16;
  std::vector<uint8_t> halves(2 * kPatterns);
  for (int64_t i = 0; i < kPatterns; ++i) {
    const auto h = static_cast<uint16_t>(i);
    std::memcpy(&halves[2 * i], &h, sizeof(h));
  }
  for (const GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    ExpectDeviceMatchesCpu(cuda(), *device_, type, halves, 256, 256, 1, Match::kBits,
                           std::string(TraitsOf(type).name) + " every pattern");
  }
  std::mt19937 rng(5);
  std::vector<uint8_t> words(4 * kPatterns);
  for (uint8_t& b : words) b = static_cast<uint8_t>(rng());
  ExpectDeviceMatchesCpu(cuda(), *device_, GgmlType::kF32, words, 256, 256, 1, Match::kBits,
                         "f32 random bits");
}

TEST_F(BackendOpsTest, TypesWithoutADecoderAreKnownAsSuch) {
  // q8_1, q2_k and q8_k exist in GGML but not here; 1000 is no type at all.
  for (const uint32_t raw : {9u, 10u, 15u, 1000u}) EXPECT_FALSE(cuda::HasDecoder(raw)) << raw;
  for (const GgmlType type : {GgmlType::kF32, GgmlType::kQ4_0, GgmlType::kQ6_K}) {
    EXPECT_TRUE(cuda::HasDecoder(static_cast<uint32_t>(type)));
  }
}

}  // namespace
}  // namespace ripplekv::kernels

#endif  // RIPPLEKV_TEST_HAVE_CUDA
