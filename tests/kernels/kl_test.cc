// KlDivergenceRows: exact zero on identical rows, hand-computed small cases, agreement with a naive
// double computation over a real vocabulary width, stability at large logits, and shape checks.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops/devices.h"
#include "kernels/ops/softmax.h"

namespace ripplekv::kernels {
namespace {

OpContext Cpu(int threads = 1) { return {.device = Device::kCpu, .num_threads = threads}; }

// KL of one row pair, or NaN on error.
float Kl(std::vector<float> p, std::vector<float> q) {
  const int64_t v = static_cast<int64_t>(p.size());
  float out = NAN;
  Status s = KlDivergenceRows(Cpu(), ConstTensorView(p.data(), {1, v}),
                              ConstTensorView(q.data(), {1, v}), std::span<float>(&out, 1));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Naive reference: softmax in double, then sum P log(P / Q).
double NaiveKl(const float* p, const float* q, int64_t v) {
  double mp = p[0], mq = q[0];
  for (int64_t j = 0; j < v; ++j) mp = std::max<double>(mp, p[j]), mq = std::max<double>(mq, q[j]);
  double sp = 0, sq = 0;
  for (int64_t j = 0; j < v; ++j) sp += std::exp(p[j] - mp), sq += std::exp(q[j] - mq);
  double kl = 0;
  for (int64_t j = 0; j < v; ++j) {
    const double pj = std::exp(p[j] - mp) / sp, qj = std::exp(q[j] - mq) / sq;
    kl += pj * std::log(pj / qj);
  }
  return kl;
}

Tensor Random(Shape shape, float sd, uint64_t seed) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, sd);
  for (float& x : t.span()) x = n(rng);
  return t;
}

TEST(KlDivergenceTest, IdenticalRowsGiveExactlyZero) {
  for (float sd : {0.01f, 1.0f, 30.0f}) {
    const Tensor p = Random({5, 4096}, sd, 1);
    std::vector<float> out(5, -1.0f);
    ASSERT_TRUE(KlDivergenceRows(Cpu(), p.view(), p.view(), out).ok());
    for (float x : out) EXPECT_EQ(x, 0.0f) << "sd " << sd;
  }
}

TEST(KlDivergenceTest, HandComputedTwoAndThreeWay) {
  // P = (1/2, 1/2), Q = (1/4, 3/4): KL = ln(4/3) / 2.
  const float ln3 = std::log(3.0f);
  const double q0 = 1.0 / (1.0 + std::exp(double(ln3)));  // Q with the logit rounded to float
  EXPECT_NEAR(Kl({0.0f, 0.0f}, {0.0f, ln3}), 0.5 * std::log(0.25 / (q0 * (1 - q0))), 1e-7);
  EXPECT_NEAR(Kl({0.0f, 0.0f}, {0.0f, ln3}), 0.5 * std::log(4.0 / 3.0), 1e-6);
  // P = (.2, .3, .5), Q = (.5, .25, .25): .2 ln .4 + .3 ln 1.2 + .5 ln 2; logits shifted by
  // arbitrary constants, which softmax ignores.
  const double want = 0.2 * std::log(0.4) + 0.3 * std::log(1.2) + 0.5 * std::log(2.0);
  EXPECT_NEAR(Kl({std::log(0.2f) - 3, std::log(0.3f) - 3, std::log(0.5f) - 3},
                 {std::log(0.5f) + 5, std::log(0.25f) + 5, std::log(0.25f) + 5}),
              want, 1e-6);
}

TEST(KlDivergenceTest, IsAsymmetric) {
  const float ln3 = std::log(3.0f);
  const float pq = Kl({0.0f, 0.0f}, {0.0f, ln3});
  const float qp = Kl({0.0f, ln3}, {0.0f, 0.0f});
  EXPECT_NEAR(pq, 0.5 * std::log(4.0 / 3.0), 1e-6);                    // 0.14384
  EXPECT_NEAR(qp, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-6);  // 0.13081
  EXPECT_GT(pq - qp, 0.01);
}

TEST(KlDivergenceTest, MatchesNaiveDoubleOnVocabularyWideRows) {
  const int64_t m = 3, v = 49152;
  const Tensor p = Random({m, v}, 3.0f, 2);
  // Independent rows (KL ~ O(10)), a realistic perturbation (KL ~ 0.1) and a tiny one (KL ~ 1e-6):
  // the last checks that the cancellation in the formula keeps relative precision.
  for (float delta : {-1.0f, 0.5f, 1e-3f}) {
    Tensor q = delta < 0 ? Random({m, v}, 3.0f, 3) : Random({m, v}, delta, 4);
    if (delta > 0) {
      for (int64_t i = 0; i < m * v; ++i) q.data()[i] += p.data()[i];
    }
    std::vector<float> out(m);
    ASSERT_TRUE(KlDivergenceRows(Cpu(2), p.view(), q.view(), out).ok());
    for (int64_t i = 0; i < m; ++i) {
      const double want = NaiveKl(p.data() + i * v, q.data() + i * v, v);
      EXPECT_GT(want, 0.0);
      EXPECT_NEAR(out[i], want, 1e-6 * want) << "delta " << delta << " row " << i;
    }
  }
}

TEST(KlDivergenceTest, LargeLogitsAreStable) {
  // A uniform shift of 2000 is invisible: exactly 0.
  EXPECT_EQ(Kl({1000, 999, 998}, {-1000, -1001, -1002}), 0.0f);
  // P ~ (1, e^-2000, e^-1), Q ~ (e^-1, 1, e^-2000): Q's third probability underflows double, but
  // the log-space formula still gives KL = (1 + 1999 / e) / (1 + 1 / e).
  const double want = (1.0 + 1999.0 * std::exp(-1.0)) / (1.0 + std::exp(-1.0));
  const float got = Kl({1000, -1000, 999}, {999, 1000, -1000});
  EXPECT_TRUE(std::isfinite(got));
  EXPECT_NEAR(got, want, 1e-6 * want);
}

TEST(KlDivergenceTest, MinusInfinityIsAZeroProbabilityToken) {
  // P puts no mass on token 2: same as the 2-way case.
  EXPECT_NEAR(Kl({0.0f, 0.0f, -INFINITY}, {0.0f, std::log(3.0f), 0.0f}),
              0.5 * std::log(0.5 / 0.2) + 0.5 * std::log(0.5 / 0.6), 1e-6);
  // Q puts no mass where P has some: infinite.
  EXPECT_EQ(Kl({0.0f, 0.0f}, {0.0f, -INFINITY}), INFINITY);
}

TEST(KlDivergenceTest, DoesNotDependOnThreadCount) {
  const Tensor p = Random({9, 1000}, 2.0f, 5), q = Random({9, 1000}, 2.0f, 6);
  std::vector<float> one(9), many(9);
  ASSERT_TRUE(KlDivergenceRows(Cpu(1), p.view(), q.view(), one).ok());
  ASSERT_TRUE(KlDivergenceRows(Cpu(4), p.view(), q.view(), many).ok());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), 9 * sizeof(float)), 0);
}

TEST(KlDivergenceTest, RejectsBadShapesNamingThem) {
  Tensor p({2, 5}), q({2, 4}), flat({10}), empty({2, 0});
  std::vector<float> out(2);
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  Status s = KlDivergenceRows(Cpu(), p.view(), q.view(), out);
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_NE(s.message().find("[2, 4]"), std::string::npos) << s;
  EXPECT_EQ(KlDivergenceRows(Cpu(), flat.view(), flat.view(), out).code(), kInvalid);
  EXPECT_EQ(KlDivergenceRows(Cpu(), empty.view(), empty.view(), out).code(), kInvalid);
  s = KlDivergenceRows(Cpu(), p.view(), p.view(), std::span<float>(out).first(1));
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_NE(s.message().find("out"), std::string::npos) << s;
  ConstTensorView on_gpu = p.view();
  on_gpu.device = Device::kCuda;
  if (DeviceCount(Device::kCuda) == 0) {  // no kernel (CPU-only build) or no device to run it
    const Status st = KlDivergenceRows({.device = Device::kCuda}, on_gpu, on_gpu, out);
    EXPECT_TRUE(st.code() == absl::StatusCode::kUnimplemented ||
                st.code() == absl::StatusCode::kFailedPrecondition)
        << st;
  }
}

}  // namespace
}  // namespace ripplekv::kernels
