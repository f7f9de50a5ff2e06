// Every op against a naive reference (and hand-computed values where they are small), plus the
// shape checks of the front ends. When a CUDA backend lands, each case runs on every device.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops/activation.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/attention_stats.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/gather.h"
#include "kernels/ops/kv_cache.h"
#include "kernels/ops/linear.h"
#include "kernels/ops/noise.h"
#include "kernels/ops/norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/softmax.h"

namespace ripplekv::kernels {
namespace {

Tensor Random(Shape shape, uint64_t seed) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& v : t.span()) v = n(rng);
  return t;
}

class OpsTest : public ::testing::TestWithParam<int> {
 protected:
  OpContext ctx() const { return {.device = Device::kCpu, .num_threads = GetParam()}; }
};

TEST_P(OpsTest, LinearMatchesNaiveWithBiasAndAccumulate) {
  for (int64_t m : {1, 7}) {
    Tensor x = Random({m, 19}, 1), w = Random({11, 19}, 2), b = Random({11}, 3);
    Tensor y = Random({m, 11}, 4);
    Tensor y0 = y.Clone();
    ASSERT_TRUE(Linear(ctx(), x.view(), w.view(), b.view(), y.view(), {.accumulate = true}).ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < 11; ++j) {
        double s = y0.data()[i * 11 + j] + b.data()[j];
        for (int64_t k = 0; k < 19; ++k) s += double(x.data()[i * 19 + k]) * w.data()[j * 19 + k];
        EXPECT_NEAR(y.data()[i * 11 + j], s, 1e-4);
      }
  }
}

TEST_P(OpsTest, LinearRejectsMismatchedShapesNamingThem) {
  Tensor x({2, 3}), w({4, 5}), y({2, 4});
  Status s = Linear(ctx(), x.view(), w.view(), {}, y.view());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[4, 5]"), std::string::npos) << s;
}

TEST_P(OpsTest, RmsNormHandComputed) {
  const float xv[] = {3.0f, 4.0f};  // mean square 12.5
  const float wv[] = {1.0f, 2.0f};
  Tensor x({1, 2}, xv), w({2}, wv), y({1, 2});
  ASSERT_TRUE(RmsNorm(ctx(), x.view(), w.view(), 1e-6f, y.view()).ok());
  const double inv = 1.0 / std::sqrt(12.5 + 1e-6);
  EXPECT_NEAR(y.data()[0], 3 * inv, 1e-6);
  EXPECT_NEAR(y.data()[1], 8 * inv, 1e-6);
}

TEST_P(OpsTest, RopeRotatesPairsByPositionTimesFrequency) {
  for (RopePairing pairing : {RopePairing::kInterleaved, RopePairing::kHalfSplit}) {
    auto table = MakeRopeTable(4, 100.0f, pairing, {}, {});
    ASSERT_TRUE(table.ok());
    Tensor x({1, 1, 4});
    // Pair 0 = (1, 0), pair 1 = (0, 1) in either layout.
    const bool il = pairing == RopePairing::kInterleaved;
    x.data()[0] = 1.0f;
    x.data()[il ? 3 : 3] = 1.0f;
    const int32_t pos[] = {3};
    ASSERT_TRUE(ApplyRope(ctx(), *table, pos, x.view()).ok());
    const double a0 = 3.0, a1 = 3.0 / 10.0;  // freqs 100^0, 100^(-1/2)
    EXPECT_NEAR(x.data()[0], std::cos(a0), 1e-6);
    EXPECT_NEAR(x.data()[il ? 1 : 2], std::sin(a0), 1e-6);
    EXPECT_NEAR(x.data()[il ? 2 : 1], -std::sin(a1), 1e-6);
    EXPECT_NEAR(x.data()[3], std::cos(a1), 1e-6);
  }
}

TEST_P(OpsTest, RopeLlama3ScalingSlowsOnlyLongWavelengths) {
  Llama3Scaling s{.factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                  .original_max_positions = 8192};
  auto plain = MakeRopeTable(128, 500000.0f, RopePairing::kHalfSplit, {}, {});
  auto scaled = MakeRopeTable(128, 500000.0f, RopePairing::kHalfSplit, {}, s);
  ASSERT_TRUE(plain.ok() && scaled.ok());
  EXPECT_FLOAT_EQ(scaled->inv_freq[0], plain->inv_freq[0]);  // wavelength 2*pi < 8192/4
  EXPECT_FLOAT_EQ(scaled->inv_freq[63], plain->inv_freq[63] / 8.0f);  // wavelength > 8192
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(scaled->inv_freq[i], plain->inv_freq[i] * 1.000001f);
    EXPECT_GE(scaled->inv_freq[i], plain->inv_freq[i] / 8.000001f);
  }
}

TEST_P(OpsTest, AttentionMatchesNaiveOnACacheWithGapsAndGqa) {
  // A compressed cache: positions with gaps, 2 KV heads for 4 query heads, queries at positions
  // that see only part of the cache.
  const int hkv = 2, hq = 4, d = 8, cap = 10, len = 6, m = 3;
  Tensor k = Random({hkv, cap, d}, 5), v = Random({hkv, cap, d}, 6), q = Random({m, hq, d}, 7);
  std::vector<int32_t> kpos(hkv * cap);
  const int32_t head0[] = {0, 2, 3, 7, 9, 12}, head1[] = {1, 2, 5, 6, 10, 12};
  for (int j = 0; j < len; ++j) {
    kpos[j] = head0[j];
    kpos[cap + j] = head1[j];
  }
  const std::vector<int32_t> qpos = {4, 9, 13};
  KvCacheView cache{k.data(), v.data(), kpos.data(), hkv, cap, len, d};
  Tensor out({m, hq, d});
  const float scale = 0.35f;
  ASSERT_TRUE(CausalAttention(ctx(), q.view(), qpos, cache, scale, out.view()).ok());
  for (int i = 0; i < m; ++i)
    for (int h = 0; h < hq; ++h) {
      const int kh = h / 2;
      std::vector<double> p;
      double mx = -1e300;
      for (int j = 0; j < len; ++j) {
        if (kpos[kh * cap + j] > qpos[i]) break;
        double s = 0;
        for (int e = 0; e < d; ++e) s += q.data()[(i * hq + h) * d + e] * k.data()[(kh * cap + j) * d + e];
        p.push_back(s * scale);
        mx = std::max(mx, p.back());
      }
      double z = 0;
      for (double& e : p) z += (e = std::exp(e - mx));
      for (int e = 0; e < d; ++e) {
        double o = 0;
        for (size_t j = 0; j < p.size(); ++j) o += p[j] / z * v.data()[(kh * cap + j) * d + e];
        EXPECT_NEAR(out.data()[(i * hq + h) * d + e], o, 1e-5) << "query " << i << " head " << h;
      }
    }
}

TEST_P(OpsTest, AttentionOverTwoSegmentsEqualsOneCombinedCache) {
  // A context segment (positions 0..7) and a probe segment (8..11) must behave like one cache
  // holding all 12 entries, with one softmax across both.
  const int hkv = 2, hq = 4, d = 8, nctx = 8, nprobe = 4;
  Tensor all_k = Random({hkv, nctx + nprobe, d}, 11), all_v = Random({hkv, nctx + nprobe, d}, 12);
  Tensor ctx_k({hkv, nctx, d}), ctx_v({hkv, nctx, d}), pr_k({hkv, nprobe, d}), pr_v({hkv, nprobe, d});
  std::vector<int32_t> all_pos(hkv * (nctx + nprobe)), ctx_pos(hkv * nctx), pr_pos(hkv * nprobe);
  for (int h = 0; h < hkv; ++h)
    for (int j = 0; j < nctx + nprobe; ++j) {
      all_pos[h * (nctx + nprobe) + j] = j;
      const float* k = all_k.data() + (h * (nctx + nprobe) + j) * d;
      const float* v = all_v.data() + (h * (nctx + nprobe) + j) * d;
      if (j < nctx) {
        std::copy_n(k, d, ctx_k.data() + (h * nctx + j) * d);
        std::copy_n(v, d, ctx_v.data() + (h * nctx + j) * d);
        ctx_pos[h * nctx + j] = j;
      } else {
        std::copy_n(k, d, pr_k.data() + (h * nprobe + j - nctx) * d);
        std::copy_n(v, d, pr_v.data() + (h * nprobe + j - nctx) * d);
        pr_pos[h * nprobe + j - nctx] = j;
      }
    }
  Tensor q = Random({nprobe, hq, d}, 13), one({nprobe, hq, d}), two({nprobe, hq, d});
  const std::vector<int32_t> qpos = {8, 9, 10, 11};
  KvCacheView whole{all_k.data(), all_v.data(), all_pos.data(), hkv, nctx + nprobe, nctx + nprobe, d};
  ASSERT_TRUE(CausalAttention(ctx(), q.view(), qpos, whole, 0.3f, one.view()).ok());
  const KvCacheView segments[] = {{ctx_k.data(), ctx_v.data(), ctx_pos.data(), hkv, nctx, nctx, d},
                                  {pr_k.data(), pr_v.data(), pr_pos.data(), hkv, nprobe, nprobe, d}};
  ASSERT_TRUE(CausalAttention(ctx(), q.view(), qpos, segments, 0.3f, two.view()).ok());
  for (int64_t i = 0; i < one.numel(); ++i) EXPECT_NEAR(one.data()[i], two.data()[i], 1e-5);
}

TEST_P(OpsTest, AttentionQueryWithNoVisibleKeyGetsZeros) {
  Tensor k = Random({1, 2, 4}, 1), v = Random({1, 2, 4}, 2), q = Random({1, 1, 4}, 3);
  const int32_t kpos[] = {5, 6};
  const int32_t qpos[] = {2};
  Tensor out = Random({1, 1, 4}, 4);
  ASSERT_TRUE(CausalAttention(ctx(), q.view(), qpos, {k.data(), v.data(), kpos, 1, 2, 2, 4}, 1.0f,
                              out.view()).ok());
  for (float x : out.span()) EXPECT_EQ(x, 0.0f);
}

TEST_P(OpsTest, SwiGluMatchesDefinition) {
  Tensor g = Random({3, 5}, 1), u = Random({3, 5}, 2), out({3, 5});
  ASSERT_TRUE(SwiGlu(ctx(), g.view(), u.view(), out.view()).ok());
  for (int i = 0; i < 15; ++i) {
    const double x = g.data()[i];
    EXPECT_NEAR(out.data()[i], x / (1 + std::exp(-x)) * u.data()[i], 1e-6);
  }
}

TEST_P(OpsTest, LogSumExpIsStableForLargeLogits) {
  const float xv[] = {1000.0f, 1000.0f, -1000.0f, 0.0f, 0.0f, 0.0f};
  Tensor x({2, 3}, xv);
  std::vector<float> lse(2);
  ASSERT_TRUE(LogSumExp(ctx(), x.view(), lse).ok());
  EXPECT_NEAR(lse[0], 1000.0 + std::log(2.0), 1e-3);
  EXPECT_NEAR(lse[1], std::log(3.0), 1e-6);
  Tensor y({2, 3});
  ASSERT_TRUE(LogSoftmax(ctx(), x.view(), y.view()).ok());
  EXPECT_NEAR(y.data()[0], -std::log(2.0), 1e-3);
}

TEST_P(OpsTest, GatherRowsCopiesTheNamedRowsInOrderWithRepeats) {
  Tensor src = Random({5, 3}, 11);
  const std::vector<int32_t> rows{4, 0, 4, 2};
  Tensor out({4, 3});
  ASSERT_TRUE(GatherRows(ctx(), src.view(), rows, out.view()).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(out.data()[i * 3 + j], src.data()[rows[i] * 3 + j]);
  }
  Tensor none({0, 3});
  EXPECT_TRUE(GatherRows(ctx(), src.view(), {}, none.view()).ok());
}

TEST_P(OpsTest, GatherRowsRejectsARowOutsideTheSourceNamingItAndWritesNothing) {
  Tensor src = Random({5, 3}, 12), out({2, 3});
  const std::vector<int32_t> rows{1, 5};
  const Status st = GatherRows(ctx(), src.view(), rows, out.view());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 5 at index 1 outside [0, 5)"), std::string::npos) << st;
  for (float v : out.span()) EXPECT_EQ(v, 0.0f);
  Tensor wrong({2, 4});
  EXPECT_EQ(GatherRows(ctx(), src.view(), std::vector<int32_t>{0, 1}, wrong.view()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OpsTest, CopyRowsTakesARangeAndRejectsOneBeyondTheSource) {
  Tensor src = Random({6, 2}, 13), out({3, 2});
  ASSERT_TRUE(CopyRows(ctx(), src.view(), 3, out.view()).ok());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.data()[i], src.data()[6 + i]);
  const Status st = CopyRows(ctx(), src.view(), 4, out.view());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rows [4, 7) outside [0, 6)"), std::string::npos) << st;
}

TEST_P(OpsTest, EmbeddingLookupExpandsTheTokensRowsAndNamesABadId) {
  Tensor table = Random({7, 4}, 14);
  const Weight w(table.Clone());
  const std::vector<int32_t> tokens{6, 0, 6};
  Tensor out({3, 4});
  ASSERT_TRUE(EmbeddingLookup(ctx(), w, tokens, out.view()).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out.data()[i * 4 + j], table.data()[tokens[i] * 4 + j]);
  }
  const std::vector<int32_t> bad{2, -1};
  Tensor out2({2, 4});
  const Status st = EmbeddingLookup(ctx(), w, bad, out2.view());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token id -1 at index 1 outside [0, 7)"), std::string::npos) << st;
}

// Hand-worked: one head, two cached keys at positions 0 and 1, queries that score them equally
// (q . k = 0 for both), so the last query attends 1/2 to each, the first only to itself.
TEST_P(OpsTest, AttentionStatsOfEqualScoresAreUniformOverVisibleKeys) {
  const std::vector<float> k{1, 0, 0, 1}, v(4, 0.0f), q(4, 0.0f);  // [1 head, 2 keys, dim 2]
  const std::vector<int32_t> pos{0, 1};
  const KvCacheView keys{k.data(), v.data(), pos.data(), 1, 2, 2, 2};
  std::vector<double> sum(2), sumsq(2), acc(2);
  double entropy = -1.0;
  const ConstTensorView last(q.data(), {1, 1, 2}), all(q.data(), {2, 1, 2});
  ASSERT_TRUE(WindowAttentionStats(ctx(), last, keys, 1.0, 0.0, sum, sumsq, &entropy).ok());
  EXPECT_DOUBLE_EQ(sum[0], 0.5);
  EXPECT_DOUBLE_EQ(sum[1], 0.5);
  EXPECT_DOUBLE_EQ(sumsq[0], 0.25);
  EXPECT_DOUBLE_EQ(entropy, 0.5 * std::log(2.0));  // only key 0 is in the prefix
  ASSERT_TRUE(AccumulatedAttention(ctx(), all, keys, 1.0, acc).ok());
  EXPECT_DOUBLE_EQ(acc[0], 1.5);  // query 0 sees only key 0; query 1 splits evenly
  EXPECT_DOUBLE_EQ(acc[1], 0.5);
  std::vector<double> short_sum(1);
  const Status st = WindowAttentionStats(ctx(), last, keys, 1.0, 0.0, short_sum, sumsq, &entropy);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sum holds 1 values, needs 2"), std::string::npos) << st;
}

// Two heads of dimension 2, capacity 3: rows in the projection layout go to head-major entries.
TEST_P(OpsTest, KvAppendWritesEveryHeadsVectorAndPositionAfterTheUsedEntries) {
  std::vector<float> k(2 * 3 * 2, -1.0f), v(k.size(), -1.0f);
  std::vector<int32_t> pos(2 * 3, -1);
  const KvLayerRef layer{k.data(), v.data(), pos.data(), 2, 3, 1, 2};
  const std::vector<float> k_rows{1, 2, 3, 4, 5, 6, 7, 8};  // token 0: h0 (1,2) h1 (3,4); token 1
  std::vector<float> v_rows(k_rows);
  for (float& x : v_rows) x *= 10;
  const std::vector<int32_t> positions{5, 9};
  ASSERT_TRUE(KvAppend(ctx(), {k_rows.data(), {2, 4}}, {v_rows.data(), {2, 4}}, positions, layer)
                  .ok());
  EXPECT_EQ(k, (std::vector<float>{-1, -1, 1, 2, 5, 6, -1, -1, 3, 4, 7, 8}));
  EXPECT_EQ(v[10], 70.0f);
  EXPECT_EQ(pos, (std::vector<int32_t>{-1, 5, 9, -1, 5, 9}));
  const KvLayerRef full{k.data(), v.data(), pos.data(), 2, 3, 2, 2};
  const Status st =
      KvAppend(ctx(), {k_rows.data(), {2, 4}}, {v_rows.data(), {2, 4}}, positions, full);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("holds 2 of 3 tokens, 2 more requested"), std::string::npos) << st;
  EXPECT_EQ(KvAppend(ctx(), {k_rows.data(), {4, 2}}, {v_rows.data(), {2, 4}}, positions, layer)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OpsTest, KvRetainCompactsEachHeadToItsOwnEntries) {
  std::vector<float> k{0, 1, 2, 3, 10, 11, 12, 13}, v(k);  // 2 heads x 4 entries, dimension 1
  std::vector<int32_t> pos{0, 1, 2, 3, 0, 1, 2, 3};
  const KvLayerRef layer{k.data(), v.data(), pos.data(), 2, 4, 4, 1};
  ASSERT_TRUE(KvRetain(ctx(), std::vector<int32_t>{1, 3, 0, 2}, 2, layer).ok());
  EXPECT_EQ(k[0], 1.0f);
  EXPECT_EQ(k[1], 3.0f);
  EXPECT_EQ(k[4], 10.0f);
  EXPECT_EQ(k[5], 12.0f);
  EXPECT_EQ(pos[1], 3);
  EXPECT_EQ(pos[5], 2);
  const Status st = KvRetain(ctx(), std::vector<int32_t>{0, 1, 2, 2}, 2, layer);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("head 1: indices must be strictly increasing in [0, 4), entry 1 is 2"),
            std::string::npos)
      << st;
}

TEST_P(OpsTest, AttentionRefusesACacheOnAnotherDeviceThanTheOp) {
  const std::vector<float> k(4), v(4);
  const std::vector<int32_t> pos{0, 1};
  KvCacheView cache{k.data(), v.data(), pos.data(), 1, 2, 2, 2};
  cache.device = Device::kCuda;
  Tensor q({1, 1, 2}), out({1, 1, 2});
  const std::vector<int32_t> qpos{1};
  const Status st = CausalAttention(ctx(), q.view(), qpos, cache, 1.0f, out.view());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("another device"), std::string::npos) << st;
  std::vector<double> sum(2), sumsq(2);
  double entropy = 0.0;
  EXPECT_EQ(WindowAttentionStats(ctx(), q.view(), cache, 1.0, 0.0, sum, sumsq, &entropy).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OpsTest, Int32InputsOnAnotherDeviceAreRefusedBeforeTheyAreRead) {
  Tensor src = Random({4, 2}, 15), out({1, 2});
  const int32_t* unreadable = reinterpret_cast<const int32_t*>(0x10);  // never dereferenced
  const Int32View on_device(unreadable, 1, Device::kCuda);
  const Status st = GatherRows(ctx(), src.view(), on_device, out.view());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("different devices"), std::string::npos) << st;
  Tensor values({1, 4});
  EXPECT_EQ(AddNormAdaptiveNoise(ctx(), {}, on_device, 0, 0.5f, values.view()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OpsTest, AnOpWithACudaKernelSaysWhyNoDeviceCanRunIt) {
  if (DeviceCount(Device::kCuda) > 0) GTEST_SKIP() << "this machine has a CUDA device";
  Tensor g({1, 2}), u({1, 2}), out({1, 2});
  auto to_cuda = [](TensorView v) { v.device = Device::kCuda; return v; };
  const Status st = SwiGlu({.device = Device::kCuda}, to_cuda(g.view()), to_cuda(u.view()),
                           to_cuda(out.view()));
  // A build with the CUDA backend names the runtime's reason; one without has no backend.
  EXPECT_TRUE(st.code() == absl::StatusCode::kFailedPrecondition ||
              st.code() == absl::StatusCode::kUnimplemented)
      << st;
  if (st.code() == absl::StatusCode::kFailedPrecondition) {
    EXPECT_NE(st.message().find(DeviceUnavailableReason(Device::kCuda)), std::string::npos) << st;
  }
}

TEST_P(OpsTest, AnOpWithoutACudaKernelIsUnimplementedOnACudaContext) {
  // DrawNormals writes host memory and runs on the CPU only (the view only claims the device:
  // nothing is read).
  const int32_t position = 0;
  const Int32View on_device(&position, 1, Device::kCuda);
  std::vector<float> out(4);
  EXPECT_EQ(DrawNormals({.device = Device::kCuda}, {}, on_device, 0, 4, out).code(),
            absl::StatusCode::kUnimplemented);
}

INSTANTIATE_TEST_SUITE_P(Threads, OpsTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ripplekv::kernels
