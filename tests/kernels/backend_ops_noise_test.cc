// The noise of kernels/ops/noise.h on the device against the CPU reference: the Philox draws are
// the same integers (so the normals differ only where CUDA's logf, sinf and cosf round differently
// from glibc's, by a few ulp), the norm-adaptive scale is the CPU's, and alpha = 0 or an all-zero
// row leaves the values bit-identical.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/ops/noise.h"
#include "tests/kernels/backend_ops_fixture.h"

#if defined(RIPPLEKV_TEST_HAVE_CUDA)
#include "kernels/ops/cuda/noise.h"
#endif

namespace ripplekv::kernels {
namespace {

// The noise contract's bound on a device normal against the CPU's (noise.h): CUDA 13's logf, sinf
// and cosf against glibc's gave at most 3 ulp over 64M draws; CUDA's documented error bounds for
// them leave room for a few more.
constexpr int64_t kMaxNormalUlps = 8;

// int32 values on the device.
Tensor DeviceInts(const std::vector<int32_t>& values, Allocator& device) {
  Tensor t({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.host_data<int32_t>());
  return t.CopyTo(device);
}

// Token positions of n rows: odd, spread over the whole int32 range, the largest included.
std::vector<int32_t> Positions(int64_t n) {
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) pos[r] = static_cast<int32_t>((r * 2654435761u) % 2147483647u);
  if (n > 1) pos[n - 1] = 2147483647;
  return pos;
}

bool BitEqual(float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// The spacing of floats at |x|.
double Ulp(float x) {
  const float m = std::abs(x);
  return static_cast<double>(std::nextafter(m, INFINITY)) - m;
}

// Rows of n_kv_heads * head_dim values, row 1 all zero (it must come back untouched).
Tensor Values(int64_t n, int64_t width, uint64_t seed) {
  Tensor v = Random({n, width}, seed, 2.0f);
  if (n > 1) std::fill(v.data() + width, v.data() + 2 * width, 0.0f);
  return v;
}

// Checks device noise `got` against the CPU's `want` on the same input `v` ([n, n_heads * d]):
// every value within kMaxNormalUlps ulp of the normal times the row's scale (the CPU's bit for
// bit), about 1e-6 of the noise added, plus half an ulp for each rounding of v + noise (one ulp of
// the larger value covers a pair straddling a power of two).
void ExpectNoiseMatches(const Tensor& got, const Tensor& want, const Tensor& v, const NoiseKey& key,
                        const std::vector<int32_t>& pos, int first_head, int n_heads, int64_t d,
                        float alpha, const OpContext& cpu) {
  const int64_t n = v.dim(0), width = v.dim(1);
  for (int h = 0; h < n_heads; ++h) {
    std::vector<float> eps(static_cast<size_t>(n * d));
    ASSERT_TRUE(DrawNormals(cpu, key, pos, first_head + h, static_cast<int>(d), eps).ok());
    for (int64_t r = 0; r < n; ++r) {
      const float* row = v.data() + r * width + h * d;
      double sum_sq = 0.0;
      for (int64_t j = 0; j < d; ++j) sum_sq += static_cast<double>(row[j]) * row[j];
      const double scale = static_cast<float>(alpha * std::sqrt(sum_sq / static_cast<double>(d)));
      for (int64_t j = 0; j < d; ++j) {
        const int64_t at = r * width + h * d + j;
        const float g = got.data()[at], w = want.data()[at];
        if (scale == 0.0) {
          ASSERT_TRUE(BitEqual(g, row[j])) << "zero row " << r << " changed at " << j;
          continue;
        }
        const double noise = kMaxNormalUlps * std::numeric_limits<float>::epsilon() * scale *
                             std::abs(eps[r * d + j]);
        const double bound = noise + Ulp(std::max(std::abs(g), std::abs(w)));
        ASSERT_LE(std::abs(static_cast<double>(g) - w), bound)
            << "row " << r << ", head " << first_head + h << ", element " << j;
      }
    }
  }
}

TEST_F(BackendOpsTest, NoiseMatchesTheCpuOverRowsHeadsAndHeadDims) {
  const NoiseKey key{.seed = 0xfedcba9876543210ull, .sample = 3, .layer = 17, .trial = 65535};
  constexpr float kAlpha = 0.3f;
  for (const int n_kv_heads : {1, 3, 8}) {
    for (const int64_t d : {64, 128}) {
      for (const int64_t n : {0, 1, 2, 37, 301}) {
        const int64_t width = n_kv_heads * d;
        const std::vector<int32_t> pos = Positions(n);
        const Tensor v = Values(n, width, 40 + n);
        Tensor want = v.Clone();
        ASSERT_TRUE(
            AddNormAdaptiveNoiseToRows(cpu(), key, pos, n_kv_heads, kAlpha, want.view()).ok());
        Tensor dv = v.CopyTo(*device_);
        const Tensor dpos = DeviceInts(pos, *device_);
        ASSERT_TRUE(AddNormAdaptiveNoiseToRows(cuda(), key, dpos.int32_view(), n_kv_heads, kAlpha,
                                               dv.view())
                        .ok());
        SCOPED_TRACE(testing::Message() << n << " rows, " << n_kv_heads << " heads of " << d);
        ExpectNoiseMatches(dv.ToHost(), want, v, key, pos, 0, n_kv_heads, d, kAlpha, cpu());
      }
    }
  }
}

TEST_F(BackendOpsTest, OneHeadsNoiseMatchesTheCpu) {
  const NoiseKey key{.seed = 7, .sample = 100000, .layer = 65535, .trial = 2};
  constexpr int kHead = 5;
  for (const int64_t d : {64, 128}) {
    for (const int64_t n : {1, 33}) {
      const std::vector<int32_t> pos = Positions(n);
      const Tensor v = Values(n, d, 60 + n);
      Tensor want = v.Clone();
      ASSERT_TRUE(AddNormAdaptiveNoise(cpu(), key, pos, kHead, 1.5f, want.view()).ok());
      Tensor dv = v.CopyTo(*device_);
      const Tensor dpos = DeviceInts(pos, *device_);
      ASSERT_TRUE(
          AddNormAdaptiveNoise(cuda(), key, dpos.int32_view(), kHead, 1.5f, dv.view()).ok());
      SCOPED_TRACE(testing::Message() << n << " rows of " << d);
      ExpectNoiseMatches(dv.ToHost(), want, v, key, pos, kHead, 1, d, 1.5f, cpu());
    }
  }
}

TEST_F(BackendOpsTest, ZeroAlphaLeavesDeviceValuesBitIdentical) {
  const std::vector<int32_t> pos = Positions(9);
  const Tensor v = Values(9, 3 * 64, 70);
  Tensor dv = v.CopyTo(*device_);
  const Tensor dpos = DeviceInts(pos, *device_);
  ASSERT_TRUE(
      AddNormAdaptiveNoiseToRows(cuda(), {.seed = 1}, dpos.int32_view(), 3, 0.0f, dv.view()).ok());
  Tensor one_head = v.Clone();
  one_head.Reshape({27, 64});
  std::vector<int32_t> pos27(27, 11);
  Tensor dh = one_head.CopyTo(*device_);
  const Tensor dpos27 = DeviceInts(pos27, *device_);
  ASSERT_TRUE(
      AddNormAdaptiveNoise(cuda(), {.seed = 1}, dpos27.int32_view(), 2, 0.0f, dh.view()).ok());
  const Tensor back = dv.ToHost(), back_head = dh.ToHost();
  for (int64_t i = 0; i < v.numel(); ++i) {
    ASSERT_TRUE(BitEqual(back.data()[i], v.data()[i])) << "ToRows, value " << i;
    ASSERT_TRUE(BitEqual(back_head.data()[i], v.data()[i])) << "one head, value " << i;
  }
}

#if defined(RIPPLEKV_TEST_HAVE_CUDA)
// The distance in ulps between two finite floats (adjacent floats are 1 apart, across 0 too).
int64_t UlpDistance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

// The normals themselves (the CUDA launcher of DrawNormals; the op keeps its host output on the
// CPU). A different Philox integer anywhere would put a normal far outside the bound, and would
// leave almost none bit-equal: the contract is that most are bit-equal (81% when measured) and
// all are within kMaxNormalUlps.
TEST_F(BackendOpsTest, DeviceNormalsAreTheCpusToAFewUlpsAndMostlyBitEqual) {
  const NoiseKey key{.seed = 0x0123456789abcdefull, .sample = 9, .layer = 31, .trial = 400};
  int64_t total = 0, equal = 0, worst = 0;
  for (const int kv_head : {0, 7, 65535}) {
    for (const int d : {4, 64, 128}) {
      for (const int64_t n : {0, 1, 1001}) {
        const std::vector<int32_t> pos = Positions(n);
        std::vector<float> want(static_cast<size_t>(n * d));
        ASSERT_TRUE(DrawNormals(cpu(), key, pos, kv_head, d, want).ok());
        const Tensor dpos = DeviceInts(pos, *device_);
        Tensor got({n, d}, DType::kF32, *device_);
        ASSERT_EQ(cuda::DrawNormals(cuda(), key.seed, key.sample, key.layer, key.trial,
                                    static_cast<const int32_t*>(dpos.raw()), n, kv_head, d,
                                    static_cast<float*>(got.raw())),
                  0);
        const Tensor back = got.ToHost();
        for (int64_t i = 0; i < n * d; ++i) {
          const int64_t ulps = UlpDistance(back.data()[i], want[i]);
          ASSERT_LE(ulps, kMaxNormalUlps) << "head " << kv_head << ", d " << d << ", entry " << i
                                          << ": " << back.data()[i] << " vs " << want[i];
          worst = std::max(worst, ulps);
          equal += ulps == 0;
          ++total;
        }
      }
    }
  }
  EXPECT_GE(static_cast<double>(equal) / total, 0.5)
      << equal << " of " << total << " bit-equal, worst " << worst << " ulp";
}
#endif

}  // namespace
}  // namespace ripplekv::kernels
