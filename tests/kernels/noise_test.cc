// Philox4x32-10 against Random123's published known answers, the noise contract of
// kernels/ops/noise.h (counter layout, Box-Muller formula), the statistics of the draws, the
// norm-adaptive scale, determinism across thread counts, and the argument checks.

#include "kernels/ops/noise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/ops/devices.h"
#include "kernels/ops/philox.h"

namespace ripplekv::kernels {
namespace {

OpContext Cpu(int threads = 1) { return {.device = Device::kCpu, .num_threads = threads}; }

bool Equal(const PhiloxCounter& a, const PhiloxCounter& b) {
  return a.v[0] == b.v[0] && a.v[1] == b.v[1] && a.v[2] == b.v[2] && a.v[3] == b.v[3];
}

// Random123 tests/kat_vectors, philox4x32_10 lines (counter words, key words, expected output).
struct Kat {
  PhiloxCounter ctr;
  PhiloxKey key;
  PhiloxCounter want;
};
constexpr Kat kKats[] = {
    {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

// constexpr, so a CUDA build can use the same function in device code and the compiler proves it.
static_assert(Philox4x32_10(kKats[2].ctr, kKats[2].key).v[0] == 0xd16cfe09);

TEST(PhiloxTest, MatchesRandom123KnownAnswerVectors) {
  for (const Kat& k : kKats) {
    const PhiloxCounter got = Philox4x32_10(k.ctr, k.key);
    EXPECT_TRUE(Equal(got, k.want))
        << std::hex << got.v[0] << " " << got.v[1] << " " << got.v[2] << " " << got.v[3];
  }
}

TEST(PhiloxTest, NoiseCounterPacksTheDesignLayout) {
  const PhiloxCounter c = NoiseCounter(123456, 0x12, 0x345, 77, 0xab, 0xcd);
  EXPECT_TRUE(Equal(c, PhiloxCounter{{123456, 0x00120345, 77, 0x00ab00cd}}));
  const PhiloxKey k = NoiseKeyWords(0x0123456789abcdefull);
  EXPECT_EQ(k.v[0], 0x89abcdefu);
  EXPECT_EQ(k.v[1], 0x01234567u);
}

TEST(PhiloxTest, BoxMullerFollowsTheDocumentedFormula) {
  // Extreme words included: x0 = 0xffffffff gives u1 = 1 (r = 0), x0 = 0 the largest radius.
  const PhiloxCounter xs[] = {{{0, 0, 0xffffffff, 0xffffffff}},
                              {{0x80000000, 0x40000000, 12345, 0xdeadbeef}},
                              Philox4x32_10({{1, 2, 3, 4}}, {{5, 6}})};
  for (const PhiloxCounter& x : xs) {
    float z[4];
    BoxMuller4(x, z);
    for (int pair = 0; pair < 2; ++pair) {
      const double u1 = (static_cast<double>(x.v[2 * pair]) + 1.0) / 4294967296.0;
      const double u2 = static_cast<double>(x.v[2 * pair + 1]) / 4294967296.0;
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double a = 2.0 * std::numbers::pi * u2;
      EXPECT_NEAR(z[2 * pair], r * std::cos(a), 2e-6 * (1.0 + r));
      EXPECT_NEAR(z[2 * pair + 1], r * std::sin(a), 2e-6 * (1.0 + r));
      EXPECT_TRUE(std::isfinite(z[2 * pair]) && std::isfinite(z[2 * pair + 1]));
    }
  }
}

TEST(DrawNormalsTest, UsesTheContractCounterForEveryBlock) {
  const NoiseKey key{.seed = 0xfedcba9876543210ull, .sample = 3, .layer = 29, .trial = 7};
  const std::vector<int32_t> positions = {0, 42, 4095};
  const int head_dim = 64, kv_head = 2;
  std::vector<float> out(positions.size() * head_dim);
  ASSERT_TRUE(DrawNormals(Cpu(), key, positions, kv_head, head_dim, out).ok());
  for (size_t r = 0; r < positions.size(); ++r) {
    for (int b = 0; b < head_dim / 4; ++b) {
      const PhiloxCounter ctr{
          {static_cast<uint32_t>(positions[r]), (2u << 16) | b, 3, (29u << 16) | 7}};
      float want[4];
      BoxMuller4(Philox4x32_10(ctr, {{0x76543210, 0xfedcba98}}), want);
      EXPECT_EQ(std::memcmp(want, &out[r * head_dim + 4 * b], sizeof(want)), 0)
          << "row " << r << " block " << b;
    }
  }
}

TEST(DrawNormalsTest, MillionDrawsAreStandardNormal) {
  const int head_dim = 64, n = 15625;  // 1e6 draws
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> z(static_cast<size_t>(n) * head_dim);
  ASSERT_TRUE(DrawNormals(Cpu(2), {.seed = 2024, .layer = 5}, positions, 1, head_dim, z).ok());
  const double count = static_cast<double>(z.size());
  double sum = 0, sum2 = 0, sum4 = 0, within1 = 0, pair_product = 0, max_abs = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double x = z[i];
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    within1 += std::abs(x) < 1.0;
    max_abs = std::max(max_abs, std::abs(x));
    if (i % 2 == 0) pair_product += x * z[i + 1];  // the two outputs of one Box-Muller pair
  }
  const double mean = sum / count, var = sum2 / count - mean * mean;
  // Bounds are ~5 standard errors of each estimator at N = 1e6.
  EXPECT_NEAR(mean, 0.0, 5e-3);
  EXPECT_NEAR(var, 1.0, 7e-3);
  EXPECT_NEAR(sum4 / count, 3.0, 0.05);                // kurtosis of a normal
  EXPECT_NEAR(within1 / count, 0.682689, 2.5e-3);      // P(|z| < 1)
  EXPECT_NEAR(pair_product / (count / 2), 0.0, 7e-3);  // z0, z1 uncorrelated
  EXPECT_LE(max_abs, 6.67);                            // sqrt(-2 ln 2^-32)
  EXPECT_GT(max_abs, 4.0);                             // tails are there
}

TEST(DrawNormalsTest, SameKeyGivesSameStream) {
  const NoiseKey key{.seed = 99, .sample = 1, .layer = 2, .trial = 3};
  const std::vector<int32_t> positions = {5, 6, 7};
  std::vector<float> a(3 * 32), b(3 * 32);
  ASSERT_TRUE(DrawNormals(Cpu(), key, positions, 0, 32, a).ok());
  ASSERT_TRUE(DrawNormals(Cpu(), key, positions, 0, 32, b).ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(DrawNormalsTest, EveryKeyFieldSelectsADifferentStream) {
  const NoiseKey base{.seed = 0x0000000100000001ull, .sample = 1, .layer = 1, .trial = 1};
  auto draw = [](const NoiseKey& key, int32_t position, int head) {
    std::vector<float> out(64);
    const int32_t pos[] = {position};
    EXPECT_TRUE(DrawNormals(Cpu(), key, pos, head, 64, out).ok());
    return out;
  };
  const std::vector<float> ref = draw(base, 1, 1);
  NoiseKey seed_lo = base, seed_hi = base, sample = base, layer = base, trial = base;
  seed_lo.seed ^= 1;
  seed_hi.seed ^= 1ull << 32;
  sample.sample = 2;
  layer.layer = 2;
  trial.trial = 2;
  const std::vector<std::vector<float>> others = {
      draw(seed_lo, 1, 1), draw(seed_hi, 1, 1), draw(sample, 1, 1), draw(layer, 1, 1),
      draw(trial, 1, 1),   draw(base, 2, 1),    draw(base, 1, 2)};
  for (size_t k = 0; k < others.size(); ++k) {
    int same = 0;
    for (size_t j = 0; j < ref.size(); ++j) same += ref[j] == others[k][j];
    EXPECT_EQ(same, 0) << "variant " << k;
  }
  // Blocks within one vector differ too (block is part of the counter).
  int same_blocks = 0;
  for (int j = 4; j < 64; ++j) same_blocks += ref[j] == ref[j % 4];
  EXPECT_EQ(same_blocks, 0);
}

TEST(DrawNormalsTest, DoesNotDependOnThreadCount) {
  std::vector<int32_t> positions(997);
  std::iota(positions.begin(), positions.end(), 10);
  std::vector<float> one(positions.size() * 16), many(positions.size() * 16);
  const NoiseKey key{.seed = 5};
  ASSERT_TRUE(DrawNormals(Cpu(1), key, positions, 3, 16, one).ok());
  ASSERT_TRUE(DrawNormals(Cpu(4), key, positions, 3, 16, many).ok());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0);
}

// Rows of the given norms (random directions), head_dim 64.
Tensor RowsWithNorms(const std::vector<double>& norms, int head_dim, uint64_t seed) {
  Tensor t({static_cast<int64_t>(norms.size()), head_dim});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  for (size_t r = 0; r < norms.size(); ++r) {
    std::vector<double> row(head_dim);
    double sq = 0;
    for (double& x : row) {
      x = n(rng);
      sq += x * x;
    }
    for (int j = 0; j < head_dim; ++j) {
      t.data()[r * head_dim + j] = static_cast<float>(row[j] * norms[r] / std::sqrt(sq));
    }
  }
  return t;
}

TEST(AddNormAdaptiveNoiseTest, AddsExactlyScaleTimesTheDrawnNormals) {
  const NoiseKey key{.seed = 11, .sample = 4, .layer = 3, .trial = 1};
  const std::vector<int32_t> positions = {3, 1, 8};
  Tensor v = RowsWithNorms({0.5, 20.0, 3.0}, 32, 1);
  const Tensor v0 = v.Clone();
  std::vector<float> eps(3 * 32);
  ASSERT_TRUE(DrawNormals(Cpu(), key, positions, 1, 32, eps).ok());
  ASSERT_TRUE(AddNormAdaptiveNoise(Cpu(), key, positions, 1, 0.25f, v.view()).ok());
  for (int r = 0; r < 3; ++r) {
    double sq = 0;
    for (int j = 0; j < 32; ++j) sq += double(v0.data()[r * 32 + j]) * v0.data()[r * 32 + j];
    const float scale = static_cast<float>(0.25 * std::sqrt(sq / 32));
    for (int j = 0; j < 32; ++j) {
      EXPECT_FLOAT_EQ(v.data()[r * 32 + j], v0.data()[r * 32 + j] + scale * eps[r * 32 + j]);
    }
  }
}

TEST(AddNormAdaptiveNoiseTest, RelativePerturbationIsAlphaWhateverTheNorm) {
  const int head_dim = 64, rows = 2000;
  const float alpha = 0.1f;
  std::vector<int32_t> positions(rows);
  std::iota(positions.begin(), positions.end(), 0);
  for (double norm : {1e-3, 1.0, 1e3}) {
    Tensor v = RowsWithNorms(std::vector<double>(rows, norm), head_dim, 7);
    const Tensor v0 = v.Clone();
    ASSERT_TRUE(
        AddNormAdaptiveNoise(Cpu(2), {.seed = 1, .layer = 9}, positions, 0, alpha, v.view()).ok());
    double mean_rel = 0;
    for (int r = 0; r < rows; ++r) {
      double diff = 0, base = 0;
      for (int j = 0; j < head_dim; ++j) {
        const double a = v0.data()[r * head_dim + j], b = v.data()[r * head_dim + j];
        diff += (b - a) * (b - a);
        base += a * a;
      }
      mean_rel += std::sqrt(diff / base) / rows;
    }
    // E||eps|| / sqrt(d) = 0.9961 for d = 64; the mean over 2000 rows has sd ~ 2e-3 * alpha.
    EXPECT_NEAR(mean_rel, alpha * 0.9961, 0.01 * alpha) << "norm " << norm;
  }
}

TEST(AddNormAdaptiveNoiseTest, AlphaZeroAndZeroRowsAreBitIdentical) {
  Tensor v = RowsWithNorms({1.0, 2.0}, 8, 3);
  v.data()[1] = -0.0f;
  const Tensor v0 = v.Clone();
  const std::vector<int32_t> positions = {0, 1};
  ASSERT_TRUE(AddNormAdaptiveNoise(Cpu(), {.seed = 1}, positions, 0, 0.0f, v.view()).ok());
  EXPECT_EQ(std::memcmp(v.data(), v0.data(), 16 * sizeof(float)), 0);

  Tensor zeros({2, 8});
  zeros.data()[3] = -0.0f;
  const Tensor zeros0 = zeros.Clone();
  ASSERT_TRUE(AddNormAdaptiveNoise(Cpu(), {.seed = 1}, positions, 0, 0.5f, zeros.view()).ok());
  EXPECT_EQ(std::memcmp(zeros.data(), zeros0.data(), 16 * sizeof(float)), 0);
}

TEST(AddNormAdaptiveNoiseTest, DoesNotDependOnThreadCount) {
  std::vector<int32_t> positions(513);
  std::iota(positions.begin(), positions.end(), 100);
  std::vector<double> norms(positions.size());
  for (size_t i = 0; i < norms.size(); ++i) norms[i] = 0.1 + i;
  Tensor one = RowsWithNorms(norms, 64, 4);
  Tensor many = one.Clone();
  const NoiseKey key{.seed = 77, .sample = 2, .layer = 1, .trial = 6};
  ASSERT_TRUE(AddNormAdaptiveNoise(Cpu(1), key, positions, 2, 0.3f, one.view()).ok());
  ASSERT_TRUE(AddNormAdaptiveNoise(Cpu(4), key, positions, 2, 0.3f, many.view()).ok());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.numel() * sizeof(float)), 0);
}

TEST(AddNormAdaptiveNoiseTest, RejectsInvalidArgumentsNamingThem) {
  Tensor v({2, 8});
  const std::vector<int32_t> pos = {0, 1};
  auto code = [](const Status& s) { return s.code(); };
  auto message = [](const Status& s) { return std::string(s.message()); };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  const NoiseKey ok{.seed = 1};

  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), ok, pos, 0, -0.1f, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), ok, pos, 0, NAN, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), ok, pos, 0, INFINITY, v.view())), kInvalid);
  Status s = AddNormAdaptiveNoise(Cpu(), ok, pos, -1, 0.1f, v.view());
  EXPECT_EQ(code(s), kInvalid);
  EXPECT_NE(message(s).find("kv_head"), std::string::npos) << s;
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), ok, pos, 65536, 0.1f, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), {.layer = 65536}, pos, 0, 0.1f, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), {.layer = -1}, pos, 0, 0.1f, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), {.trial = 65536}, pos, 0, 0.1f, v.view())), kInvalid);
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), {.sample = -1}, pos, 0, 0.1f, v.view())), kInvalid);
  const std::vector<int32_t> negative = {0, -5};
  s = AddNormAdaptiveNoise(Cpu(), ok, negative, 0, 0.1f, v.view());
  EXPECT_EQ(code(s), kInvalid);
  EXPECT_NE(message(s).find("positions[1]"), std::string::npos) << s;
  // Shapes: head_dim not a multiple of 4, row count != positions, rank 1.
  Tensor v6({2, 6}), v3({3, 8}), flat({16});
  s = AddNormAdaptiveNoise(Cpu(), ok, pos, 0, 0.1f, v6.view());
  EXPECT_EQ(code(s), kInvalid);
  EXPECT_NE(message(s).find("head_dim"), std::string::npos) << s;
  s = AddNormAdaptiveNoise(Cpu(), ok, pos, 0, 0.1f, v3.view());
  EXPECT_EQ(code(s), kInvalid);
  EXPECT_NE(message(s).find("[3, 8]"), std::string::npos) << s;
  EXPECT_EQ(code(AddNormAdaptiveNoise(Cpu(), ok, pos, 0, 0.1f, flat.view())), kInvalid);
  // A rejected call leaves values alone.
  for (float x : v.span()) EXPECT_EQ(x, 0.0f);
  // On a machine without a GPU a CUDA call is refused before anything is read (the views only
  // claim the device): FailedPrecondition where the build has the backend, Unimplemented where not.
  TensorView on_gpu = v.view();
  on_gpu.device = Device::kCuda;
  const Int32View pos_on_gpu(pos.data(), static_cast<int64_t>(pos.size()), Device::kCuda);
  if (DeviceCount(Device::kCuda) == 0) {
    const auto c =
        code(AddNormAdaptiveNoise({.device = Device::kCuda}, ok, pos_on_gpu, 0, 0.1f, on_gpu));
    EXPECT_TRUE(c == absl::StatusCode::kFailedPrecondition ||
                c == absl::StatusCode::kUnimplemented);
  }
  // Positions on the host for an op on the device are a mismatch.
  EXPECT_EQ(code(AddNormAdaptiveNoise({.device = Device::kCuda}, ok, pos, 0, 0.1f, on_gpu)),
            kInvalid);
}

TEST(DrawNormalsTest, RejectsBadSizesAndBounds) {
  const std::vector<int32_t> pos = {0, 1};
  std::vector<float> out(2 * 8);
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(DrawNormals(Cpu(), {}, pos, 0, 8, std::span<float>(out).first(15)).code(), kInvalid);
  EXPECT_EQ(DrawNormals(Cpu(), {}, pos, 0, 0, {}).code(), kInvalid);
  // head_dim bound: 4 * 65536 is the largest block index that fits 16 bits.
  EXPECT_TRUE(DrawNormals(Cpu(), {}, {}, 0, 4 * 65536, {}).ok());
  EXPECT_EQ(DrawNormals(Cpu(), {}, {}, 0, 4 * 65537, {}).code(), kInvalid);
}

// Projection rows [n, heads * head_dim]: every head gets exactly the per-head op's noise.
TEST(AddNormAdaptiveNoiseTest, ToRowsGivesEachHeadThePerHeadNoiseBitForBit) {
  constexpr int kHeads = 3, kDim = 8, kRows = 5;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> rows(kRows * kHeads * kDim);
  for (float& v : rows) v = normal(rng);
  const std::vector<int32_t> positions{3, 4, 9, 10, 11};
  const NoiseKey key{.seed = 5, .sample = 2, .layer = 7, .trial = 1};
  std::vector<float> expected = rows;
  for (int h = 0; h < kHeads; ++h) {
    std::vector<float> head(kRows * kDim);
    for (int r = 0; r < kRows; ++r) {
      std::memcpy(&head[r * kDim], &rows[(r * kHeads + h) * kDim], kDim * sizeof(float));
    }
    ASSERT_TRUE(AddNormAdaptiveNoise({.num_threads = 1}, key, positions, h, 0.3f,
                                     TensorView{head.data(), {kRows, kDim}})
                    .ok());
    for (int r = 0; r < kRows; ++r) {
      std::memcpy(&expected[(r * kHeads + h) * kDim], &head[r * kDim], kDim * sizeof(float));
    }
  }
  for (int threads : {1, 2}) {
    std::vector<float> got = rows;
    ASSERT_TRUE(AddNormAdaptiveNoiseToRows({.num_threads = threads}, key, positions, kHeads, 0.3f,
                                           TensorView{got.data(), {kRows, kHeads * kDim}})
                    .ok());
    EXPECT_EQ(got, expected) << threads << " threads";
  }
  std::vector<float> got = rows;
  EXPECT_EQ(AddNormAdaptiveNoiseToRows({.num_threads = 1}, key, positions, 5, 0.3f,
                                       TensorView{got.data(), {kRows, kHeads * kDim}})
                .code(),
            absl::StatusCode::kInvalidArgument);  // 24 columns are not 5 heads
}

}  // namespace
}  // namespace ripplekv::kernels
