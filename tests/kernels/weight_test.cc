// Weights kept in their stored type (kernels/dequant/weight.h) and the Linear over them: a stored
// matrix expands to exactly the values of dequantizing it whole, and Linear over a stored weight
// is bit-identical to Linear over its fp32 expansion for M > 1 (the GEMM path), at any thread
// count; one row (the fused dequantize-dot GEMV) stays within the bound of kernels/dequant/gemv.h.

#include "kernels/dequant/weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/quantize.h"
#include "kernels/ops/linear.h"

namespace ripplekv::kernels {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// [rows, cols] random values encoded in `type`.
std::vector<uint8_t> Encode(GgmlType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> values = Random(rows * cols, seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(*GgmlBytes(type, rows * cols)));
  EXPECT_TRUE(QuantizeRow(type, values, bytes).ok());
  return bytes;
}

class StoredWeightTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(StoredWeightTest, ExpandsToTheValuesOfWholeTensorDequantization) {
  const GgmlType type = GetParam();
  const int64_t rows = 300, cols = 96;
  const std::vector<uint8_t> bytes = Encode(type, rows, cols, 1);
  auto w = Weight::Stored(type, bytes, {rows, cols}, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  Tensor whole({rows, cols});
  ASSERT_TRUE(Dequantize(type, bytes, whole.view()).ok());
  const Tensor expanded = w->Expand();
  ASSERT_EQ(std::memcmp(expanded.data(), whole.data(), rows * cols * sizeof(float)), 0);
  std::vector<float> slice(5 * cols);
  w->ExpandRows(129, 5, slice.data());
  EXPECT_EQ(std::memcmp(slice.data(), whole.data() + 129 * cols, slice.size() * sizeof(float)), 0);
  EXPECT_EQ(w->MemoryBytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(w->f32() != nullptr, type == GgmlType::kF32);
}

TEST_P(StoredWeightTest, LinearIsBitIdenticalToTheExpandedWeights) {
  const GgmlType type = GetParam();
  const int64_t n = 300, k = 96;  // three column slices, the last one partial
  const std::vector<uint8_t> bytes = Encode(type, n, k, 2);
  auto stored = Weight::Stored(type, bytes, {n, k}, nullptr);
  ASSERT_TRUE(stored.ok()) << stored.status();
  const Weight expanded(stored->Expand());
  ASSERT_NE(expanded.f32(), nullptr);
  const std::vector<float> bias = Random(n, 3);
  const ConstTensorView b(bias.data(), {n});
  for (int64_t m : {1, 7}) {
    const std::vector<float> xs = Random(m * k, 4 + m);
    const ConstTensorView x(xs.data(), {m, k});
    Tensor reference({m, n});
    ASSERT_TRUE(Linear({.num_threads = 1}, x, expanded, b, reference.view()).ok());
    for (int threads : {1, 2}) {
      Tensor y({m, n});
      ASSERT_TRUE(Linear({.num_threads = threads}, x, *stored, b, y.view()).ok());
      for (int64_t i = 0; i < m * n; ++i) {
        if (m > 1) {
          ASSERT_EQ(y.data()[i], reference.data()[i]) << "m " << m << " element " << i;
        } else {  // the fused GEMV: another summation order, within gemv.h's bound
          double magnitude = std::fabs(bias[i]);
          for (int64_t c = 0; c < k; ++c) {
            magnitude += std::fabs(static_cast<double>(expanded.f32()[i * k + c]) * xs[c]);
          }
          const double bound = (k + 17) * std::ldexp(1.0, -23) * magnitude;
          ASSERT_NEAR(y.data()[i], reference.data()[i], bound) << "element " << i;
        }
      }
    }
  }
}

// Decode's one-row Linear splits the rows evenly across threads (not in slices): every thread
// count gives the same bits, and accumulating adds exactly the product a plain call writes.
TEST_P(StoredWeightTest, OneRowLinearIsThreadCountIndependentAndAccumulatesItsProduct) {
  const GgmlType type = GetParam();
  const int64_t n = 193, k = 64;  // an odd row count: no even split into threads or slices
  const std::vector<uint8_t> bytes = Encode(type, n, k, 5);
  auto w = Weight::Stored(type, bytes, {n, k}, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<float> xs = Random(k, 6), start = Random(n, 7), bias = Random(n, 8);
  const ConstTensorView x(xs.data(), {1, k}), b(bias.data(), {n});
  Tensor product({1, n});
  ASSERT_TRUE(Linear({.num_threads = 1}, x, *w, {}, product.view()).ok());
  for (int threads : {1, 2, 3}) {
    Tensor plain({1, n});
    ASSERT_TRUE(Linear({.num_threads = threads}, x, *w, {}, plain.view()).ok());
    Tensor y({1, n});
    std::copy(start.begin(), start.end(), y.data());
    ASSERT_TRUE(Linear({.num_threads = threads}, x, *w, b, y.view(), {.accumulate = true}).ok());
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(plain.data()[j], product.data()[j]) << threads << " threads, row " << j;
      ASSERT_EQ(y.data()[j], (start[j] + product.data()[j]) + bias[j])
          << threads << " threads, row " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, StoredWeightTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kF16,
                                           GgmlType::kBF16, GgmlType::kF32),
                         [](const auto& info) { return std::string(TraitsOf(info.param).name); });

TEST(WeightTest, StoredSizeMismatchIsInvalidArgumentWithBothSizes) {
  std::vector<uint8_t> bytes(100);
  auto w = Weight::Stored(GgmlType::kQ8_0, bytes, {2, 64}, nullptr);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), ::testing::HasSubstr("needs 136 bytes, got 100"));
  auto partial = Weight::Stored(GgmlType::kQ8_0, bytes, {1, 48}, nullptr);
  EXPECT_THAT(std::string(partial.status().message()), ::testing::HasSubstr("whole number"));
}

TEST(WeightTest, ExpandedTensorIsAnF32Weight) {
  Tensor t({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const float* data = t.data();
  Weight w(std::move(t));
  EXPECT_EQ(w.f32(), data);
  EXPECT_EQ(w.rows(), 2);
  EXPECT_EQ(w.cols(), 3);
  EXPECT_EQ(w.MemoryBytes(), 24);
  EXPECT_TRUE(Weight().empty());
  EXPECT_EQ(Weight().MemoryBytes(), 0);
}

}  // namespace
}  // namespace ripplekv::kernels
