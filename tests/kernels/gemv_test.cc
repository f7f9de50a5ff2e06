#include "kernels/dequant/gemv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/tensor/tensor.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/fp16.h"
#include "kernels/dequant/quantize.h"

namespace ripplekv::kernels {
namespace {

int64_t BlockValues(GgmlType type) { return TraitsOf(type).block_elements; }
int64_t RowBytes(GgmlType type, int64_t cols) { return *GgmlBytes(type, cols); }

void PutHalf(std::vector<uint8_t>& b, size_t at, float value) {
  const uint16_t h = FloatToHalf(value);
  b[at] = static_cast<uint8_t>(h & 0xff);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

// A random [rows, cols] matrix of `type`: quantized normal values where quantize.h can write the
// type, otherwise random quant bytes with fp16 scales (and minimums) of realistic size.
std::vector<uint8_t> RandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes));
  if (CanQuantize(type)) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = 0.05f * normal(rng);
      const Status s = QuantizeRow(
          type, row, std::span<uint8_t>(w.data() + r * row_bytes, static_cast<size_t>(row_bytes)));
      EXPECT_TRUE(s.ok()) << s;
    }
    return w;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.01f), minimum(-0.12f, 0.02f);
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  for (size_t at = 0; at < w.size(); at += static_cast<size_t>(block_bytes)) {
    switch (type) {
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        PutHalf(w, at, scale(rng));
        PutHalf(w, at + 2, (type == GgmlType::kQ5_1 ? 2.0f : 1.0f) * minimum(rng));
        break;
      case GgmlType::kQ5_0:
        PutHalf(w, at, scale(rng));
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:  // 6-bit scales and mins up to 63 multiply d and dmin
        PutHalf(w, at, 0.1f * scale(rng));
        PutHalf(w, at + 2, (type == GgmlType::kQ5_K ? 1.0f : 0.5f) * scale(rng));
        break;
      case GgmlType::kQ6_K:  // int8 scales up to 127
        PutHalf(w, at + 208, 0.05f * scale(rng));
        break;
      default:
        ADD_FAILURE() << "no generator for " << TraitsOf(type).name;
    }
  }
  return w;
}

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

// The exact value of each y[i] (to double precision) and sum_k |w[k] x[k]|, from Dequantize().
struct Reference {
  std::vector<double> value, magnitude;
};
Reference ReferenceGemv(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                        const std::vector<float>& x) {
  Tensor dense({rows, cols});
  const Status s = Dequantize(type, w, dense.view());
  EXPECT_TRUE(s.ok()) << s;
  Reference ref{std::vector<double>(rows), std::vector<double>(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < cols; ++k) {
      const double p = static_cast<double>(dense.data()[i * cols + k]) * x[k];  // exact
      ref.value[i] += p;
      ref.magnitude[i] += std::fabs(p);
    }
  }
  return ref;
}

// The bound stated in gemv.h: (cols + 16) * 2^-23 * sum_k |w[k] x[k]|.
double Bound(int64_t cols, double magnitude) {
  return static_cast<double>(cols + 16) * std::ldexp(1.0, -23) * magnitude;
}

std::vector<float> Gemv(const GemvOptions& options, GgmlType type, std::span<const uint8_t> w,
                        int64_t rows, int64_t cols, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(rows), std::nanf(""));
  const Status s = DequantGemv(options, type, w, rows, cols, x, y);
  EXPECT_TRUE(s.ok()) << s;
  return y;
}

// Shapes in blocks of the type: one block, 4096 values (or 4096 + 5 for plain types), and an odd
// count; rows not a multiple of anything useful.
std::vector<std::pair<int64_t, int64_t>> Shapes(GgmlType type) {
  const int64_t b = BlockValues(type);
  if (b == 1) return {{5, 1}, {7, 13}, {3, 37}, {37, 4096 + 5}, {1, 4096}};
  return {{5, b}, {7, 3 * b}, {37, 4096}, {1, 5 * b}};
}

// ---------------------------------------------------------------- per type and implementation

class GemvTypeTest : public ::testing::TestWithParam<std::tuple<GgmlType, GemvImpl>> {
 protected:
  void SetUp() override {
    if (!GemvImplSupported(impl())) {
      GTEST_SKIP() << "this CPU or build has no " << GemvImplName(impl()) << " implementation";
    }
  }
  GgmlType type() const { return std::get<0>(GetParam()); }
  GemvImpl impl() const { return std::get<1>(GetParam()); }
  std::string Name() const {
    return std::string(TraitsOf(type()).name) + " " + std::string(GemvImplName(impl()));
  }
};

TEST_P(GemvTypeTest, MatchesTheDequantizedReferenceWithinTheStatedBound) {
  double worst = 0.0;  // max |y - ref| / sum |w x|
  uint32_t seed = 1;
  for (const auto& [rows, cols] : Shapes(type())) {
    const std::vector<uint8_t> w = RandomMatrix(type(), rows, cols, ++seed);
    const std::vector<float> x = RandomVector(cols, ++seed);
    const std::vector<float> y = Gemv({.impl = impl()}, type(), w, rows, cols, x);
    const Reference ref = ReferenceGemv(type(), w, rows, cols, x);
    for (int64_t i = 0; i < rows; ++i) {
      const double err = std::fabs(static_cast<double>(y[i]) - ref.value[i]);
      ASSERT_LE(err, Bound(cols, ref.magnitude[i]))
          << Name() << " [" << rows << ", " << cols << "] row " << i << ": y " << y[i] << " ref "
          << ref.value[i] << " sum|wx| " << ref.magnitude[i];
      ASSERT_GT(ref.magnitude[i], 0.0) << "degenerate test data";
      worst = std::max(worst, err / ref.magnitude[i]);
    }
  }
  std::cout << "[ measured ] " << Name() << ": max |y - ref| / sum|w x| = " << worst << " ("
            << worst / std::ldexp(1.0, -23) << " x 2^-23)\n";
}

// With x = e_k, y[i] is weight (i, k) itself: every kernel must place every weight exactly, and
// its value must be bit-identical to Dequantize()'s.
TEST_P(GemvTypeTest, OneHotInputGivesTheDequantizedColumnExactly) {
  const int64_t rows = 3, cols = std::max<int64_t>(2 * BlockValues(type()), 11);
  const std::vector<uint8_t> w = RandomMatrix(type(), rows, cols, 99);
  Tensor dense({rows, cols});
  ASSERT_TRUE(Dequantize(type(), w, dense.view()).ok());
  std::vector<float> x(static_cast<size_t>(cols), 0.0f);
  for (int64_t k = 0; k < cols; ++k) {
    x[k] = 1.0f;
    const std::vector<float> y = Gemv({.impl = impl()}, type(), w, rows, cols, x);
    x[k] = 0.0f;
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_EQ(y[i], dense.data()[i * cols + k]) << Name() << " weight (" << i << ", " << k << ")";
    }
  }
}

TEST_P(GemvTypeTest, ThreadCountsGiveBitIdenticalResults) {
  const int64_t rows = 29, cols = 8 * BlockValues(type()) + (BlockValues(type()) == 1 ? 3 : 0);
  const std::vector<uint8_t> w = RandomMatrix(type(), rows, cols, 7);
  const std::vector<float> x = RandomVector(cols, 8);
  const std::vector<float> one = Gemv({.num_threads = 1, .impl = impl()}, type(), w, rows, cols, x);
  for (int threads : {2, 3}) {
    const std::vector<float> many =
        Gemv({.num_threads = threads, .impl = impl()}, type(), w, rows, cols, x);
    EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
        << Name() << " with " << threads << " threads";
  }
}

// A slice of rows passed as its own byte span, from an odd address, gives the same bits as those
// rows of the whole product.
TEST_P(GemvTypeTest, RowSlicesFromAnyAddressMatchTheWholeProduct) {
  const int64_t rows = 11, cols = 2 * BlockValues(type()) + (BlockValues(type()) == 1 ? 5 : 0);
  const int64_t row_bytes = RowBytes(type(), cols);
  const std::vector<uint8_t> w = RandomMatrix(type(), rows, cols, 17);
  const std::vector<float> x = RandomVector(cols, 18);
  const std::vector<float> whole = Gemv({.impl = impl()}, type(), w, rows, cols, x);
  const int64_t r0 = 3, n = 5;
  std::vector<uint8_t> shifted(static_cast<size_t>(n * row_bytes + 1));
  std::memcpy(shifted.data() + 1, w.data() + r0 * row_bytes, static_cast<size_t>(n * row_bytes));
  const std::vector<float> part = Gemv(
      {.impl = impl()}, type(),
      std::span<const uint8_t>(shifted.data() + 1, static_cast<size_t>(n * row_bytes)), n, cols, x);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(part[i], whole[r0 + i]) << Name() << " row " << i;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GemvTypeTest,
                         ::testing::Combine(::testing::ValuesIn(kGgmlTypes),
                                            ::testing::Values(GemvImpl::kScalar, GemvImpl::kAvx2)),
                         [](const ::testing::TestParamInfo<GemvTypeTest::ParamType>& info) {
                           return std::string(TraitsOf(std::get<0>(info.param)).name) + "_" +
                                  std::string(GemvImplName(std::get<1>(info.param)));
                         });

// ---------------------------------------------------------------- across implementations

TEST(GemvTest, Avx2AgreesWithScalarWithinTwiceTheBound) {
  if (!GemvImplSupported(GemvImpl::kAvx2)) GTEST_SKIP() << "this CPU or build has no AVX2 kernels";
  for (GgmlType type : kGgmlTypes) {
    const int64_t rows = 13, cols = 4096;
    const std::vector<uint8_t> w = RandomMatrix(type, rows, cols, 31);
    const std::vector<float> x = RandomVector(cols, 32);
    const std::vector<float> scalar = Gemv({.impl = GemvImpl::kScalar}, type, w, rows, cols, x);
    const std::vector<float> avx2 = Gemv({.impl = GemvImpl::kAvx2}, type, w, rows, cols, x);
    const Reference ref = ReferenceGemv(type, w, rows, cols, x);
    for (int64_t i = 0; i < rows; ++i) {
      EXPECT_LE(std::fabs(static_cast<double>(scalar[i]) - avx2[i]),
                2 * Bound(cols, ref.magnitude[i]))
          << TraitsOf(type).name << " row " << i;
    }
  }
}

TEST(GemvTest, AutoResolvesToAvx2WhenTheCpuHasIt) {
  const GemvImpl resolved = ResolvedGemvImpl(GemvImpl::kAuto);
  EXPECT_EQ(resolved, GemvImplSupported(GemvImpl::kAvx2) ? GemvImpl::kAvx2 : GemvImpl::kScalar);
  EXPECT_TRUE(GemvImplSupported(GemvImpl::kScalar));
}

// The tests above can fail: a kernel that drops the minimum of a block (here: the same kernel on
// blocks whose minimum was zeroed) is far outside the bound against the true reference.
TEST(GemvTest, TheBoundRejectsAKernelThatDropsTheMinimum) {
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ5_K}) {
    const int64_t rows = 9, cols = 4096;
    const std::vector<uint8_t> w = RandomMatrix(type, rows, cols, 41);
    std::vector<float> x = RandomVector(cols, 42);
    for (float& v : x) v = std::fabs(v);  // so dropped minimums cannot cancel by chance
    std::vector<uint8_t> no_min = w;
    const int64_t block_bytes = TraitsOf(type).block_bytes;
    for (size_t at = 0; at < no_min.size(); at += static_cast<size_t>(block_bytes)) {
      no_min[at + 2] = no_min[at + 3] = 0;  // m (q4_1, q5_1) or dmin (q4_k, q5_k) = +0
    }
    const Reference ref = ReferenceGemv(type, w, rows, cols, x);
    for (GemvImpl impl : {GemvImpl::kScalar, GemvImpl::kAvx2}) {
      if (!GemvImplSupported(impl)) continue;
      const std::vector<float> y = Gemv({.impl = impl}, type, no_min, rows, cols, x);
      int64_t outside = 0;
      for (int64_t i = 0; i < rows; ++i) {
        outside +=
            std::fabs(static_cast<double>(y[i]) - ref.value[i]) > Bound(cols, ref.magnitude[i]);
      }
      EXPECT_EQ(outside, rows) << TraitsOf(type).name << " " << GemvImplName(impl);
    }
  }
}

// ---------------------------------------------------------------- sizes and errors

TEST(GemvTest, EmptyShapes) {
  std::vector<float> y(3, 5.0f);
  ASSERT_TRUE(DequantGemv({}, GgmlType::kQ4_0, {}, 3, 0, {}, y).ok());
  EXPECT_EQ(y, std::vector<float>(3, 0.0f));
  ASSERT_TRUE(DequantGemv({}, GgmlType::kQ4_0, {}, 0, 64, std::vector<float>(64), {}).ok());
}

TEST(GemvTest, SizeErrorsAreInvalidArgumentNamingTheNumbers) {
  const std::vector<uint8_t> w(18 * 4);  // q4_0 [2, 64]
  const std::vector<float> x(64);
  std::vector<float> y(2), y1(1), y3(3);
  auto expect = [](const Status& s, std::vector<std::string> parts) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(s.message()).find(p), std::string::npos) << s << " lacks " << p;
    }
  };
  expect(DequantGemv({}, GgmlType::kQ4_0, w, 2, 48, std::vector<float>(48), y), {"48", "32"});
  expect(DequantGemv({}, GgmlType::kQ4_0, std::span(w).first(70), 2, 64, x, y),
         {"72", "70", "q4_0"});
  expect(DequantGemv({}, GgmlType::kQ4_0, w, 3, 64, x, y3), {"108", "72"});
  expect(DequantGemv({}, GgmlType::kQ4_0, w, 2, 64, std::vector<float>(63), y), {"63", "64"});
  expect(DequantGemv({}, GgmlType::kQ4_0, w, 2, 64, x, y1), {"1", "2"});
  expect(DequantGemv({}, GgmlType::kQ4_0, w, -1, 64, x, y), {"-1"});
  expect(DequantGemv({.num_threads = 0}, GgmlType::kQ4_0, w, 2, 64, x, y), {"num_threads", "0"});
  expect(DequantGemv({}, GgmlType::kQ6_K, std::vector<uint8_t>(210), 1, 128,
                     std::vector<float>(128), y1),
         {"128", "256", "q6_k"});
}

}  // namespace
}  // namespace ripplekv::kernels
