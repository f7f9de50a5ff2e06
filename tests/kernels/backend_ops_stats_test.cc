// Log-sum-exp, log-softmax and the attention statistics (SnapKV/CAKE window statistics, H2O's
// accumulated attention) on the device against the CPU. Both compute in double with the same
// formulas; the device sums in another order only where the tests say so.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/attention_stats.h"
#include "kernels/ops/softmax.h"
#include "tests/kernels/backend_ops_fixture.h"

namespace ripplekv::kernels {
namespace {

// The spacing of floats at |x|.
double Ulp(float x) {
  const float m = std::abs(x);
  return static_cast<double>(std::nextafter(m, INFINITY)) - m;
}

// The most two roundings to float can part values that were `apart` before: half an ulp each
// (one ulp of the larger covers a pair straddling a power of two).
double Rounded(double apart, float a, float b) {
  return apart + Ulp(std::max(std::abs(a), std::abs(b)));
}

// Logits of m rows over a vocabulary of v: normal of scale 4, with one row of large logits
// (+-1000: the max subtraction must hold) and one holding a -inf (a zero-probability token).
Tensor Logits(int64_t m, int64_t v, uint64_t seed) {
  Tensor x = Random({m, v}, seed, 4.0f);
  if (m > 1) {
    for (int64_t j = 0; j < v; ++j) x.data()[v + j] += (j % 2 == 0 ? 1000.0f : -1000.0f);
  }
  if (m > 2 && v > 1) x.data()[2 * v + 1] = -INFINITY;
  return x;
}

// Rows x vocabulary: single rows, a vocabulary of 1, odd widths, one past a block of threads, a
// SmolLM2-sized vocabulary, an empty input.
const std::vector<std::pair<int64_t, int64_t>> kLogitShapes = {{1, 64},  {3, 1},     {7, 577},
                                                               {5, 257}, {4, 49152}, {0, 128}};

// Log-sum-exp takes the float maximum (exact), rounds log(sum) (in [0, log v]) to float and adds
// the two. The device's double sum differs from the CPU's in order and in exp's last bit only, so
// log(sum) rounds to the same float but at a rounding boundary, at most an ulp of log(v) apart;
// then the final add rounds.
double LseBound(int64_t v, float got, float want) {
  return Rounded(Ulp(static_cast<float>(std::log(static_cast<double>(v)))), got, want);
}

TEST_F(BackendOpsTest, LogSumExpMatchesTheCpuToAnUlpOfTheLogOfTheSum) {
  for (const auto& [m, v] : kLogitShapes) {
    const Tensor x = Logits(m, v, 80 + v);
    std::vector<float> want(static_cast<size_t>(m)), got(static_cast<size_t>(m));
    ASSERT_TRUE(LogSumExp(cpu(), x.view(), want).ok());
    const Tensor dx = x.CopyTo(*device_);
    ASSERT_TRUE(LogSumExp(cuda(), dx.view(), got).ok());
    for (int64_t i = 0; i < m; ++i) {
      ASSERT_TRUE(std::isfinite(want[i])) << i;
      EXPECT_NEAR(got[i], want[i], LseBound(v, got[i], want[i]))
          << "[" << m << ", " << v << "] row " << i;
    }
  }
}

TEST_F(BackendOpsTest, LogSoftmaxMatchesTheCpuAlsoInPlace) {
  for (const auto& [m, v] : kLogitShapes) {
    const Tensor x = Logits(m, v, 90 + v);
    Tensor want({m, v});
    std::vector<float> lse(static_cast<size_t>(m)), device_lse(static_cast<size_t>(m));
    ASSERT_TRUE(LogSoftmax(cpu(), x.view(), want.view()).ok());
    ASSERT_TRUE(LogSumExp(cpu(), x.view(), lse).ok());
    const Tensor dx = x.CopyTo(*device_);
    ASSERT_TRUE(LogSumExp(cuda(), dx.view(), device_lse).ok());
    Tensor dy({m, v}, DType::kF32, *device_);
    ASSERT_TRUE(LogSoftmax(cuda(), dx.view(), dy.view()).ok());
    Tensor in_place = x.CopyTo(*device_);
    ASSERT_TRUE(LogSoftmax(cuda(), in_place.view(), in_place.view()).ok());
    const Tensor got = dy.ToHost(), got_in_place = in_place.ToHost();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < v; ++j) {
        const int64_t at = i * v + j;
        const float w = want.data()[at], g = got.data()[at];
        if (std::isinf(w)) {  // the -inf logit stays -inf
          ASSERT_EQ(g, w) << "[" << m << ", " << v << "] (" << i << ", " << j << ")";
        } else {
          // y = x - lse: the log-sum-exp's difference, then y's rounding.
          ASSERT_NEAR(g, w, Rounded(LseBound(v, device_lse[i], lse[i]), g, w))
              << "[" << m << ", " << v << "] (" << i << ", " << j << ")";
        }
        ASSERT_EQ(got_in_place.data()[at], g) << "in place (" << i << ", " << j << ")";
      }
    }
  }
}

// int32 values on the device.
Tensor DeviceInts(const std::vector<int32_t>& values, Allocator& device) {
  Tensor t({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.host_data<int32_t>());
  return t.CopyTo(device);
}

// A prompt's keys in a cache with spare capacity, at positions 2j + 1 (gaps, increasing), and its
// queries; the same on the device.
struct Prompt {
  int64_t n_heads, n_kv_heads, head_dim, length;
  Tensor k, v, q;
  std::vector<int32_t> positions;
  Tensor dk, dv, dpos;

  Prompt(int64_t heads, int64_t kv_heads, int64_t dim, int64_t n, Allocator& device)
      : n_heads(heads), n_kv_heads(kv_heads), head_dim(dim), length(n) {
    const int64_t capacity = n + 3;
    k = Random({kv_heads, capacity, dim}, 100 + n, 1.5f);
    v = Random({kv_heads, capacity, dim}, 101);
    q = Random({n, heads, dim}, 102 + n, 1.5f);
    positions.resize(static_cast<size_t>(kv_heads * capacity));
    for (int64_t h = 0; h < kv_heads; ++h) {
      for (int64_t j = 0; j < capacity; ++j)
        positions[h * capacity + j] = static_cast<int32_t>(2 * j + 1);
    }
    dk = k.CopyTo(device);
    dv = v.CopyTo(device);
    dpos = DeviceInts(positions, device);
  }
  KvCacheView OnHost() const {
    return {k.data(),
            v.data(),
            positions.data(),
            static_cast<int>(n_kv_heads),
            static_cast<int>(length + 3),
            static_cast<int>(length),
            static_cast<int>(head_dim)};
  }
  KvCacheView OnDevice() const {
    KvCacheView c{static_cast<const float*>(dk.raw()),
                  static_cast<const float*>(dv.raw()),
                  static_cast<const int32_t*>(dpos.raw()),
                  static_cast<int>(n_kv_heads),
                  static_cast<int>(length + 3),
                  static_cast<int>(length),
                  static_cast<int>(head_dim)};
    c.device = Device::kCuda;
    return c;
  }
};

// The device computes every score and softmax normalizer like the CPU and sums each (head, key)
// over the queries in the CPU's order; only CUDA's double exp and log (within an ulp of glibc's)
// differ, so each value is within a few 1e-16 relative of the CPU's (exactly 0 where no query sees
// the key).
constexpr double kPerKeyRelative = 1e-12;
// The window entropy's terms are grouped by key on the device, by query on the CPU: for up to 32k
// non-negative terms the worst case of either order is 32k * 2^-53 = 3.6e-12 relative.
constexpr double kEntropyRelative = 1e-11;

struct StatsCase {
  int64_t n_heads, n_kv_heads, head_dim, length, window;
};
// GQA ratios 1, 3 and 8, head dims 64 and 128, odd lengths, a single-entry cache, a window of one
// query and one covering the whole prompt (no prefix: zero entropy).
const StatsCase kStatsCases[] = {{4, 4, 64, 37, 5},     {9, 3, 64, 301, 17}, {16, 2, 128, 129, 1},
                                 {8, 1, 128, 1000, 32}, {3, 3, 64, 1, 1},    {8, 1, 64, 23, 23}};

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), kPerKeyRelative * std::abs(want[i]))
        << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

TEST_F(BackendOpsTest, WindowAttentionStatsMatchTheCpu) {
  for (const StatsCase& c : kStatsCases) {
    SCOPED_TRACE(testing::Message()
                 << c.n_heads << "/" << c.n_kv_heads << " heads of " << c.head_dim << ", "
                 << c.length << " keys, window " << c.window);
    const Prompt p(c.n_heads, c.n_kv_heads, c.head_dim, c.length, *device_);
    // The window's queries: the last `window` rows of q.
    const int64_t first = c.length - c.window;
    const ConstTensorView q(p.q.data() + first * c.n_heads * c.head_dim,
                            {c.window, c.n_heads, c.head_dim});
    const Tensor dq_all = p.q.CopyTo(*device_);
    const ConstTensorView dq(
        static_cast<const float*>(dq_all.raw()) + first * c.n_heads * c.head_dim,
        {c.window, c.n_heads, c.head_dim}, Device::kCuda);
    const size_t cells = static_cast<size_t>(c.n_heads * c.length);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    constexpr double kEpsilon = 1e-10;
    std::vector<double> sum(cells), sumsq(cells), dsum(cells, -1.0), dsumsq(cells, -1.0);
    double entropy = 0.0, dentropy = -1.0;
    ASSERT_TRUE(
        WindowAttentionStats(cpu(), q, p.OnHost(), scale, kEpsilon, sum, sumsq, &entropy).ok());
    ASSERT_TRUE(
        WindowAttentionStats(cuda(), dq, p.OnDevice(), scale, kEpsilon, dsum, dsumsq, &dentropy)
            .ok());
    ExpectClose(dsum, sum, "sum");
    ExpectClose(dsumsq, sumsq, "sumsq");
    EXPECT_LE(std::abs(dentropy - entropy), kEntropyRelative * std::abs(entropy))
        << dentropy << " vs " << entropy;
    if (first == 0) {
      EXPECT_EQ(dentropy, 0.0);  // no prefix
    }
  }
}

TEST_F(BackendOpsTest, AccumulatedAttentionMatchesTheCpu) {
  for (const StatsCase& c : kStatsCases) {
    SCOPED_TRACE(testing::Message() << c.n_heads << "/" << c.n_kv_heads << " heads of "
                                    << c.head_dim << ", " << c.length << " keys");
    const Prompt p(c.n_heads, c.n_kv_heads, c.head_dim, c.length, *device_);
    const Tensor dq = p.q.CopyTo(*device_);
    const size_t cells = static_cast<size_t>(c.n_kv_heads * c.length);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    std::vector<double> want(cells), got(cells, -1.0);
    ASSERT_TRUE(AccumulatedAttention(cpu(), p.q.view(), p.OnHost(), scale, want).ok());
    ASSERT_TRUE(AccumulatedAttention(cuda(), dq.view(), p.OnDevice(), scale, got).ok());
    ExpectClose(got, want, "accumulated");
  }
}

TEST_F(BackendOpsTest, AttentionStatsRefuseAnEmptyWindowOnTheDeviceToo) {
  const Prompt p(2, 1, 64, 5, *device_);
  const Tensor none({0, 2, 64}, DType::kF32, *device_);
  std::vector<double> sum(10), sumsq(10);
  double entropy = 0.0;
  EXPECT_EQ(WindowAttentionStats(cuda(), none.view(), p.OnDevice(), 1.0, 0.0, sum, sumsq, &entropy)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::kernels
