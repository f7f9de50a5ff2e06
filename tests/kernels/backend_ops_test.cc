// Every op with a device kernel, on every device this machine has, against the CPU over a table of
// shapes (in the spirit of ggml's test-backend-ops): the same inputs go through the CPU and the
// device, and the normalized mean squared error of the device's output against the CPU's,
// NMSE = sum (dev - cpu)^2 / sum cpu^2, must stay under the op's stated tolerance. Without a device
// every case skips and says why (label gpu; CI has no GPU).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/activation.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/gather.h"
#include "kernels/ops/kv_cache.h"
#include "kernels/ops/norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/softmax.h"
#include "kernels/ops/upload.h"
#include "tests/kernels/backend_ops_fixture.h"

namespace ripplekv::kernels {
namespace {

// Rows x width: single rows, odd widths, widths past one block of threads, an empty input.
const std::vector<std::pair<int64_t, int64_t>> kRowShapes = {{1, 64}, {7, 576},  {33, 4096},
                                                             {3, 1},  {5, 1000}, {0, 128}};

TEST_F(BackendOpsTest, RmsNormMatchesTheCpu) {
  constexpr double kTolerance = 1e-12;  // double sums in another order, fp32 scaling
  for (const auto& [m, d] : kRowShapes) {
    const Tensor x = Random({m, d}, 1, 3.0f), w = Random({d}, 2);
    Tensor want({m, d});
    ASSERT_TRUE(RmsNorm(cpu(), x.view(), w.view(), 1e-5f, want.view()).ok());
    const Tensor dx = x.CopyTo(*device_), dw = w.CopyTo(*device_);
    Tensor dy({m, d}, DType::kF32, *device_);
    ASSERT_TRUE(RmsNorm(cuda(), dx.view(), dw.view(), 1e-5f, dy.view()).ok());
    EXPECT_LE(Nmse(dy.ToHost(), want), kTolerance) << "[" << m << ", " << d << "]";
  }
}

TEST_F(BackendOpsTest, SwiGluMatchesTheCpu) {
  constexpr double kTolerance = 1e-12;  // expf on the device vs the CPU's polynomial exp
  for (const auto& [m, d] : kRowShapes) {
    const Tensor g = Random({m, d}, 3, 4.0f), u = Random({m, d}, 4);
    Tensor want({m, d});
    ASSERT_TRUE(SwiGlu(cpu(), g.view(), u.view(), want.view()).ok());
    const Tensor dg = g.CopyTo(*device_), du = u.CopyTo(*device_);
    Tensor dout({m, d}, DType::kF32, *device_);
    ASSERT_TRUE(SwiGlu(cuda(), dg.view(), du.view(), dout.view()).ok());
    EXPECT_LE(Nmse(dout.ToHost(), want), kTolerance) << "[" << m << ", " << d << "]";
  }
}

// int32 values on the device.
Tensor Ints(const std::vector<int32_t>& values, Allocator& device) {
  Tensor t({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.host_data<int32_t>());
  return t.CopyTo(device);
}

TEST_F(BackendOpsTest, RopeMatchesTheCpuInBothPairingsAndHeadDims) {
  constexpr double kTolerance = 1e-12;  // the same double angles; FMA contraction may differ
  for (const auto pairing : {RopePairing::kInterleaved, RopePairing::kHalfSplit}) {
    for (const int64_t head_dim : {64, 128}) {
      auto table = MakeRopeTable(static_cast<int>(head_dim), 10000.0f, pairing, {}, {});
      ASSERT_TRUE(table.ok()) << table.status();
      for (const int64_t m : {1, 5, 300}) {
        std::vector<int32_t> pos(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) pos[i] = static_cast<int32_t>(7 * i + 3);
        const Tensor x = Random({m, 9, head_dim}, 6);
        Tensor want = x.Clone();
        ASSERT_TRUE(ApplyRope(cpu(), *table, pos, want.view()).ok());
        Tensor dx = x.CopyTo(*device_);
        const Tensor dpos = Ints(pos, *device_);
        ASSERT_TRUE(ApplyRope(cuda(), *table, dpos.int32_view(), dx.view()).ok());
        EXPECT_LE(Nmse(dx.ToHost(), want), kTolerance) << m << " rows, head_dim " << head_dim;
      }
    }
  }
}

TEST_F(BackendOpsTest, RowGathersEqualTheCpuExactly) {
  const Tensor src = Random({11, 37}, 7);
  const std::vector<int32_t> rows{10, 0, 3, 3, 7};
  Tensor want({5, 37}), want_range({4, 37});
  ASSERT_TRUE(GatherRows(cpu(), src.view(), rows, want.view()).ok());
  ASSERT_TRUE(CopyRows(cpu(), src.view(), 6, want_range.view()).ok());
  const Tensor dsrc = src.CopyTo(*device_), drows = Ints(rows, *device_);
  Tensor got({5, 37}, DType::kF32, *device_), got_range({4, 37}, DType::kF32, *device_);
  ASSERT_TRUE(GatherRows(cuda(), dsrc.view(), drows.int32_view(), got.view()).ok());
  ASSERT_TRUE(CopyRows(cuda(), dsrc.view(), 6, got_range.view()).ok());
  EXPECT_EQ(Nmse(got.ToHost(), want), 0.0);
  EXPECT_EQ(Nmse(got_range.ToHost(), want_range), 0.0);
}

// A cache layer of 3 heads x dimension 64, capacity 40: append 25 + 6 entries, keep 12 per head
// (different entries in each head); keys, values and positions equal the CPU's exactly.
TEST_F(BackendOpsTest, KvCacheWritesEqualTheCpuExactly) {
  constexpr int kHeads = 3, kDim = 64, kCap = 40;
  Tensor k({kHeads, kCap, kDim}), v({kHeads, kCap, kDim});
  Tensor pos({kHeads, kCap}, DType::kI32);
  Tensor dk = k.CopyTo(*device_), dv = v.CopyTo(*device_), dpos = pos.CopyTo(*device_);
  auto host_layer = [&](int length) {
    return KvLayerRef{k.data(), v.data(), pos.host_data<int32_t>(), kHeads, kCap, length, kDim};
  };
  auto device_layer = [&](int length) {
    return KvLayerRef{static_cast<float*>(dk.raw()),
                      static_cast<float*>(dv.raw()),
                      static_cast<int32_t*>(dpos.raw()),
                      kHeads,
                      kCap,
                      length,
                      kDim,
                      Device::kCuda};
  };
  int length = 0;
  for (const int n : {25, 6}) {
    const Tensor k_rows = Random({n, kHeads * kDim}, 8 + n), v_rows = Random({n, kHeads * kDim}, 9);
    std::vector<int32_t> p(n);
    for (int i = 0; i < n; ++i) p[i] = 2 * (length + i) + 1;
    ASSERT_TRUE(KvAppend(cpu(), k_rows.view(), v_rows.view(), p, host_layer(length)).ok());
    const Tensor dk_rows = k_rows.CopyTo(*device_), dv_rows = v_rows.CopyTo(*device_);
    const Tensor dp = Ints(p, *device_);
    ASSERT_TRUE(
        KvAppend(cuda(), dk_rows.view(), dv_rows.view(), dp.int32_view(), device_layer(length))
            .ok());
    length += n;
  }
  std::vector<int32_t> keep;
  for (int h = 0; h < kHeads; ++h) {
    for (int j = 0; j < 12; ++j) keep.push_back(j * 2 + h);  // strictly increasing, < 31
  }
  ASSERT_TRUE(KvRetain(cpu(), keep, 12, host_layer(length)).ok());
  const Tensor dkeep = Ints(keep, *device_);
  ASSERT_TRUE(KvRetain(cuda(), dkeep.int32_view(), 12, device_layer(length)).ok());
  EXPECT_EQ(Nmse(dk.ToHost(), k), 0.0);
  EXPECT_EQ(Nmse(dv.ToHost(), v), 0.0);
  const Tensor got_pos = dpos.ToHost();
  for (int i = 0; i < kHeads * kCap; ++i) {
    ASSERT_EQ(got_pos.host_data<int32_t>()[i], pos.host_data<int32_t>()[i]) << "entry " << i;
  }
}

// One attention cross-check: a context segment and a probe segment, n_heads query heads over
// n_kv_heads, and 1 + probe + inside queries: query 0 at position 0 sees no key (zeros), queries
// 1..probe sit after the context and see it whole plus the probe keys up to their own position,
// and `inside` more queries sit at scattered, unsorted positions inside the context, so that each
// sees a different prefix of every head's keys.
struct AttentionCase {
  int64_t n_heads, n_kv_heads, head_dim, context, probe, inside = 0;
  // q, out, K and V start one float past a 16-byte boundary (the kernel's scalar path).
  bool misaligned = false;
  // Every KV head holds different context positions (head h: (h + 2) j + h + 1, as KvRetain leaves
  // heads that kept different entries) instead of 2j + 1 for all.
  bool per_head_positions = false;
};

std::ostream& operator<<(std::ostream& os, const AttentionCase& c) {
  return os << c.n_heads << "/" << c.n_kv_heads << " heads, head_dim " << c.head_dim << ", "
            << c.context << " + " << c.probe << " keys, " << 1 + c.probe + c.inside << " queries"
            << (c.misaligned ? ", misaligned" : "") << (c.per_head_positions ? ", per-head" : "");
}

class BackendAttentionTest : public BackendOpsTest {
 protected:
  // `t` on the device, starting `offset` floats into its block: {the block, the data pointer}.
  std::pair<Tensor, const float*> OnDevice(const Tensor& t, int64_t offset) {
    std::vector<float> shifted(static_cast<size_t>(offset), 0.0f);
    shifted.insert(shifted.end(), t.data(), t.data() + t.numel());
    Tensor block = Tensor({static_cast<int64_t>(shifted.size())}, shifted).CopyTo(*device_);
    const float* data = static_cast<const float*>(block.raw()) + offset;
    return {std::move(block), data};
  }

  void ExpectMatchesTheCpu(const AttentionCase& c) {
    constexpr double kTolerance = 1e-10;  // fp32 online softmax vs BLAS dots and one softmax pass
    const int64_t kvh = c.n_kv_heads, d = c.head_dim, m = 1 + c.probe + c.inside;
    const int64_t offset = c.misaligned ? 1 : 0;
    std::vector<int32_t> ctx_pos(static_cast<size_t>(kvh * c.context)),
        probe_pos(static_cast<size_t>(kvh * c.probe)), q_pos(static_cast<size_t>(m));
    int32_t probe_start = 1;
    for (int64_t h = 0; h < kvh; ++h) {
      for (int64_t j = 0; j < c.context; ++j) {
        const int64_t pos = c.per_head_positions ? (h + 2) * j + h + 1 : 2 * j + 1;
        ctx_pos[static_cast<size_t>(h * c.context + j)] = static_cast<int32_t>(pos);
        probe_start = std::max(probe_start, static_cast<int32_t>(pos + 1));
      }
    }
    for (int64_t h = 0; h < kvh; ++h) {
      for (int64_t j = 0; j < c.probe; ++j) {
        probe_pos[static_cast<size_t>(h * c.probe + j)] = static_cast<int32_t>(probe_start + j);
      }
    }
    q_pos[0] = 0;
    for (int64_t i = 1; i <= c.probe; ++i) q_pos[i] = static_cast<int32_t>(probe_start + i - 1);
    for (int64_t k = 0; k < c.inside; ++k) {
      q_pos[1 + c.probe + k] = static_cast<int32_t>((k * 7919 + 13) % probe_start);
    }
    const Tensor ck = Random({kvh, c.context, d}, 10), cv = Random({kvh, c.context, d}, 11);
    const Tensor pk = Random({kvh, c.probe, d}, 12), pv = Random({kvh, c.probe, d}, 13);
    const Tensor q = Random({m, c.n_heads, d}, 14);
    const int ih = static_cast<int>(kvh), id = static_cast<int>(d);
    const int ic = static_cast<int>(c.context), ip = static_cast<int>(c.probe);
    const KvCacheView host[] = {{ck.data(), cv.data(), ctx_pos.data(), ih, ic, ic, id},
                                {pk.data(), pv.data(), probe_pos.data(), ih, ip, ip, id}};
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    Tensor want({m, c.n_heads, d});
    ASSERT_TRUE(CausalAttention(cpu(), q.view(), q_pos, host, scale, want.view()).ok()) << c;

    const auto [dck, ck_data] = OnDevice(ck, offset);
    const auto [dcv, cv_data] = OnDevice(cv, offset);
    const auto [dpk, pk_data] = OnDevice(pk, offset);
    const auto [dpv, pv_data] = OnDevice(pv, offset);
    const auto [dq, q_data] = OnDevice(q, offset);
    const Tensor dctx_pos = Ints(ctx_pos, *device_), dprobe_pos = Ints(probe_pos, *device_);
    const Tensor dq_pos = Ints(q_pos, *device_);
    auto p = [](const Tensor& t) { return static_cast<const int32_t*>(t.raw()); };
    const KvCacheView dev[] = {{ck_data, cv_data, p(dctx_pos), ih, ic, ic, id, Device::kCuda},
                               {pk_data, pv_data, p(dprobe_pos), ih, ip, ip, id, Device::kCuda}};
    const Shape shape{m, c.n_heads, d};
    Tensor out_block({offset + m * c.n_heads * d}, DType::kF32, *device_);
    const TensorView out{static_cast<float*>(out_block.raw()) + offset, shape, Device::kCuda};
    ASSERT_TRUE(CausalAttention(cuda(), ConstTensorView(q_data, shape, Device::kCuda),
                                dq_pos.int32_view(), dev, scale, out)
                    .ok())
        << c;
    const Tensor back_block = out_block.ToHost();
    const Tensor back(shape, std::span<const float>(back_block.data() + offset,
                                                    static_cast<size_t>(m * c.n_heads * d)));
    EXPECT_LE(Nmse(back, want), kTolerance) << c;
    for (int64_t e = 0; e < c.n_heads * d; ++e) ASSERT_EQ(back.data()[e], 0.0f) << "query 0, " << c;
  }
};

// Two segments (a context with position gaps and a probe), GQA ratios 1, 3 and 8, head dims 64
// and 128, odd lengths.
TEST_F(BackendAttentionTest, MatchesTheCpuOverSegmentsAndGqaRatios) {
  for (const AttentionCase& c :
       {AttentionCase{4, 4, 64, 37, 5}, AttentionCase{9, 3, 64, 301, 17},
        AttentionCase{16, 2, 128, 129, 1}, AttentionCase{8, 1, 128, 1000, 32}}) {
    ExpectMatchesTheCpu(c);
  }
}

// Several query tiles (64 rows each up to head_dim 128, 32 beyond), head_dim 96 (padded to 128)
// and 256, head dims that are not a multiple of 4 (the kernel's scalar path), up to 130 (the
// widest tiling with padding).
TEST_F(BackendAttentionTest, MatchesTheCpuOverQueryTilesAndHeadDims) {
  for (const AttentionCase& c :
       {AttentionCase{4, 2, 96, 200, 20, 130}, AttentionCase{4, 1, 256, 90, 40, 60},
        AttentionCase{3, 3, 30, 45, 9, 70}, AttentionCase{2, 1, 130, 70, 3, 33},
        AttentionCase{2, 2, 64, 33, 64, 128}}) {
    ExpectMatchesTheCpu(c);
  }
}

// Views that start one float into their buffer: the kernel must not take its float4 path.
TEST_F(BackendAttentionTest, MatchesTheCpuOnMisalignedViews) {
  for (const AttentionCase& c :
       {AttentionCase{8, 2, 64, 100, 40, 30, true}, AttentionCase{2, 1, 128, 50, 7, 70, true},
        AttentionCase{2, 2, 256, 20, 5, 10, true}}) {
    ExpectMatchesTheCpu(c);
  }
}

// KV heads that retained different entries: every head has its own positions, so a query sees a
// different number of keys in each.
TEST_F(BackendAttentionTest, MatchesTheCpuWithPerHeadRetainedPositions) {
  for (const AttentionCase& c : {AttentionCase{6, 3, 64, 150, 10, 70, false, true},
                                 AttentionCase{4, 4, 128, 77, 3, 40, true, true}}) {
    ExpectMatchesTheCpu(c);
  }
}

// KL over a SmolLM2-sized vocabulary: q is p plus noise of 1e-3 (the calibration regime, KLs of
// about 1e-7) or 1 (large KLs); one row identical (exactly 0), one with a -inf logit.
TEST_F(BackendOpsTest, KlDivergenceMatchesTheCpuWithinRelativeRounding) {
  constexpr double kRelative = 1e-5;  // the fp32-mode bound for a whole task's KL
  constexpr int64_t kVocab = 49152;
  for (const float noise : {1e-3f, 1.0f}) {
    const int64_t m = 6;
    const Tensor p = Random({m, kVocab}, 20, 4.0f), delta = Random({m, kVocab}, 21, noise);
    Tensor q = p.Clone();
    for (int64_t i = m * kVocab - 1; i >= kVocab; --i) q.data()[i] += delta.data()[i];  // row 0 = p
    q.data()[2 * kVocab + 5] = -INFINITY;
    std::vector<float> want(m), got(m);
    ASSERT_TRUE(KlDivergenceRows(cpu(), p.view(), q.view(), want).ok());
    const Tensor dp = p.CopyTo(*device_), dq = q.CopyTo(*device_);
    ASSERT_TRUE(KlDivergenceRows(cuda(), dp.view(), dq.view(), got).ok());
    EXPECT_EQ(got[0], 0.0f);
    EXPECT_EQ(want[2], INFINITY) << "a -inf logit of q where p > 0 is an infinite KL";
    for (int64_t i = 1; i < m; ++i) {
      if (std::isinf(want[i])) {  // EXPECT_NEAR(inf, inf) fails on inf - inf = NaN
        EXPECT_EQ(got[i], want[i]) << "row " << i << ", noise " << noise;
      } else {
        EXPECT_NEAR(got[i], want[i], kRelative * want[i]) << "row " << i << ", noise " << noise;
      }
    }
  }
}

// A rank of two whose peer contributes nothing (identity reductions): the vocabulary-parallel
// pieces of one slice, the same on both backends.
class LoneRankOfTwo final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status AllReduceSum(const OpContext&, const TensorView&) override { return absl::OkStatus(); }
  Status AllReduceSum(std::span<double>) override { return absl::OkStatus(); }
  Status AllReduceMax(std::span<double>) override { return absl::OkStatus(); }
  Status AllGather(const OpContext&, const ConstTensorView&, const TensorView&) override {
    return absl::UnimplementedError("not needed");
  }
  Status Broadcast(std::span<uint8_t>, int) override { return absl::OkStatus(); }
  Status Barrier() override { return absl::OkStatus(); }
};

TEST_F(BackendOpsTest, VocabularyParallelKlAndLogSumExpMatchTheCpu) {
  LoneRankOfTwo comm;
  OpContext host = cpu(), device = cuda();
  host.communicator = device.communicator = &comm;
  const int64_t m = 5, v = 24577;  // an odd slice of the vocabulary
  const Tensor p = Random({m, v}, 30, 4.0f), delta = Random({m, v}, 31, 1e-2f);
  Tensor q = p.Clone();
  for (int64_t i = 0; i < m * v; ++i) q.data()[i] += delta.data()[i];
  std::vector<float> want(m), got(m), want_lse(m), got_lse(m);
  ASSERT_TRUE(KlDivergenceRows(host, p.view(), q.view(), want).ok());
  ASSERT_TRUE(LogSumExp(host, p.view(), want_lse).ok());
  const Tensor dp = p.CopyTo(*device_), dq = q.CopyTo(*device_);
  ASSERT_TRUE(KlDivergenceRows(device, dp.view(), dq.view(), got).ok());
  ASSERT_TRUE(LogSumExp(device, dp.view(), got_lse).ok());
  for (int64_t i = 0; i < m; ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << i;  // double sums in another order
    EXPECT_NEAR(got_lse[i], want_lse[i], 1e-6 * std::abs(want_lse[i])) << i;
  }
}

TEST_F(BackendOpsTest, TensorsRoundTripThroughTheDevice) {
  const Tensor x = Random({17, 3}, 5);
  const Tensor back = x.CopyTo(*device_).Clone().ToHost();
  EXPECT_EQ(Nmse(back, x), 0.0);
}

// Runs everywhere: what a machine without a device reports.
TEST(DevicesTest, ParsesDeviceNamesAndExplainsAMissingDevice) {
  EXPECT_EQ(ParseDevice("cuda:3")->ordinal, 3);
  EXPECT_EQ(ParseDevice("cpu")->device, Device::kCpu);
  EXPECT_EQ(DeviceSpecName(*ParseDevice("cuda")), "cuda:0");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA"}) {
    EXPECT_EQ(ParseDevice(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(DeviceCount(Device::kCpu), 1);
  if (DeviceCount(Device::kCuda) == 0) {
    const auto none = DeviceAllocator({Device::kCuda, 0});
    EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(std::string(none.status().message()).find("no usable cuda device: "),
              std::string::npos)
        << none.status();
    EXPECT_FALSE(DeviceUnavailableReason(Device::kCuda).empty());
  } else {
    EXPECT_EQ(DeviceAllocator({Device::kCuda, DeviceCount(Device::kCuda)}).status().code(),
              absl::StatusCode::kOutOfRange);
  }
}

// Runs everywhere: a CPU session owns nothing; a device session needs a device.
TEST(DevicesTest, SessionsOpenOnTheCpuAndExplainAMissingDevice) {
  auto cpu = DeviceSession::Open({Device::kCpu, 0}, 3);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->context().device, Device::kCpu);
  EXPECT_EQ(cpu->context().num_threads, 3);
  EXPECT_EQ(cpu->context().stream, nullptr);
  EXPECT_EQ(cpu->context().blas, nullptr);
  EXPECT_EQ(cpu->context().communicator, nullptr);
  EXPECT_EQ(&cpu->allocator(), &HostAllocator());
  EXPECT_TRUE(cpu->Synchronize().ok());
  // Moving a session moves its resources: the moved-from one holds none.
  DeviceSession moved = std::move(*cpu);
  EXPECT_EQ(moved.context().num_threads, 3);
  EXPECT_EQ(DeviceSession::Open({Device::kCpu, 0}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Uploading needs a device session.
  EXPECT_EQ(UploadWeight(moved, Weight(Tensor({2, 2})), DType::kBF16).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (DeviceCount(Device::kCuda) == 0) {
    const auto none = DeviceSession::Open({Device::kCuda, 0}, 1);
    EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(std::string(none.status().message()).find("no usable cuda device: "),
              std::string::npos)
        << none.status();
  } else {
    auto session = DeviceSession::Open({Device::kCuda, 0}, 1);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_NE(session->context().stream, nullptr);
    EXPECT_NE(session->context().blas, nullptr);
    EXPECT_EQ(session->context().workspace.bytes, DeviceSession::kDefaultWorkspaceBytes);
    EXPECT_TRUE(session->Synchronize().ok());
    EXPECT_EQ(UploadWeight(*session, Weight(Tensor({2, 2})), DType::kI32).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ripplekv::kernels
