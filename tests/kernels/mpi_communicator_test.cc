// The MPI communicator (kernels/comm/mpi_communicator.h) on real ranks under mpirun (label mpi):
// each collective against values every rank can compute for itself, the rank-order sum that
// leaves all ranks bit-identical, groups of a larger world, and the argument checks.

#include "kernels/comm/mpi_communicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ripplekv::kernels {
namespace {

constexpr std::chrono::seconds kTimeout{30};

MpiRuntime& Runtime() { return **MpiRuntime::Init(nullptr, nullptr); }

std::unique_ptr<Communicator> World() {
  auto c = MpiGroup(Runtime(), Runtime().world_size(), kTimeout);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(MpiCommunicatorTest, RunsOnMoreThanOneRank) {
  EXPECT_TRUE(MpiRuntime::Launched());
  EXPECT_GE(Runtime().world_size(), 2);
  EXPECT_EQ(World()->size(), Runtime().world_size());
}

TEST(MpiCommunicatorTest, AllReduceSumIsTheRankOrderSumOnEveryRank) {
  auto c = World();
  const int n = c->size();
  // Values whose float sum depends on the order: rank r holds 1e8 for r == 0, else 1 + r * 1e-3.
  Tensor x({3, 5});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = c->rank() == 0 ? 1e8f + static_cast<float>(i) : 1.0f + c->rank() * 1e-3f * i;
  }
  ASSERT_TRUE(c->AllReduceSum(OpContext(), x.view()).ok());
  for (int64_t i = 0; i < x.numel(); ++i) {
    float want = 1e8f + static_cast<float>(i);
    for (int r = 1; r < n; ++r) want += 1.0f + r * 1e-3f * i;
    EXPECT_EQ(x.data()[i], want) << i;
  }
  // Every rank holds the same bits: the maximum and the sum over ranks of a value agree.
  std::vector<double> mine(x.numel()), max(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) mine[i] = max[i] = x.data()[i];
  ASSERT_TRUE(c->AllReduceMax(max).ok());
  ASSERT_TRUE(c->AllReduceSum(mine).ok());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(mine[i], n * max[i]) << i;
}

TEST(MpiCommunicatorTest, GatherBroadcastAndBarrier) {
  auto c = World();
  const int n = c->size();
  Tensor in({2}), out({2 * static_cast<int64_t>(n)});
  in.data()[0] = static_cast<float>(c->rank());
  in.data()[1] = static_cast<float>(10 * c->rank());
  ASSERT_TRUE(c->AllGather(OpContext(), in.view(), out.view()).ok());
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(out.data()[2 * r], r);
    EXPECT_EQ(out.data()[2 * r + 1], 10 * r);
  }
  std::vector<uint8_t> bytes(5, static_cast<uint8_t>(c->rank()));
  if (c->rank() == n - 1) bytes = {1, 2, 3, 4, 5};
  ASSERT_TRUE(c->Broadcast(bytes, n - 1).ok());
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(c->Barrier().ok());
  // Sizes are checked before anything moves.
  Tensor wrong({3});
  EXPECT_EQ(c->AllGather(OpContext(), in.view(), wrong.view()).code(),
            absl::StatusCode::kInvalidArgument);
  TensorView on_device = in.view();
  on_device.device = Device::kCuda;
  EXPECT_EQ(c->AllReduceSum(OpContext(), on_device).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MpiCommunicatorTest, GroupsSplitTheWorldIntoConsecutiveRanks) {
  const int world = Runtime().world_size();
  auto ones = MpiGroup(Runtime(), 1, kTimeout);
  ASSERT_TRUE(ones.ok());
  EXPECT_EQ((*ones)->size(), 1);
  EXPECT_EQ((*ones)->rank(), 0);
  std::vector<double> v = {static_cast<double>(Runtime().world_rank())};
  ASSERT_TRUE((*ones)->AllReduceSum(v).ok());
  EXPECT_EQ(v[0], Runtime().world_rank());  // a group of one sums only itself
  if (world % 2 == 0) {
    auto pairs = MpiGroup(Runtime(), 2, kTimeout);
    ASSERT_TRUE(pairs.ok());
    EXPECT_EQ((*pairs)->rank(), Runtime().world_rank() % 2);
  }
  EXPECT_EQ(MpiGroup(Runtime(), world + 1, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::kernels
