#pragma once
// The checks of an NCCL group's calls that hold for any way its ranks were formed (under mpirun,
// tests/kernels/nccl_communicator_test.cc; as threads of one process, nccl_threads_test.cc). Each
// runs on every rank of the group together, with that rank's group and its CUDA session, and
// checks against values every rank can compute.

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"
#include "kernels/tensor/tensor.h"

namespace ripplekv::kernels::nccl_checks {

inline Tensor OnDevice(const DeviceSession& session, const Shape& shape,
                       std::span<const float> values) {
  return Tensor(shape, values).CopyTo(session.allocator());
}

// Device all-reduce: exact on small integers; on values whose float sum depends on the order,
// every rank still holds the same bits.
inline void AllReduceSumGivesEveryRankTheSameSum(Communicator& nccl, const DeviceSession& session) {
  const OpContext& ctx = session.context();
  const int n = nccl.size(), me = nccl.rank();
  std::vector<float> values(15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(me + 1 + i);
  Tensor x = OnDevice(session, {3, 5}, values);
  ASSERT_TRUE(nccl.AllReduceSum(ctx, x.view()).ok());
  Tensor sum = x.ToHost();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(sum.data()[i], static_cast<float>(n * (n + 1) / 2 + n * i)) << i;
  }
  // The sum over ranks of each value is size() times its maximum when all hold the same bits.
  std::vector<float> uneven(64);
  for (size_t i = 0; i < uneven.size(); ++i) {
    uneven[i] = me == 0 ? 1e8f + static_cast<float>(i) : 1.0f + me * 1e-3f * i;
  }
  Tensor y = OnDevice(session, {64}, uneven);
  ASSERT_TRUE(nccl.AllReduceSum(ctx, y.view()).ok());
  Tensor got = y.ToHost();
  std::vector<double> mine(got.data(), got.data() + got.numel()), max = mine;
  ASSERT_TRUE(nccl.AllReduceMax(max).ok());
  ASSERT_TRUE(nccl.AllReduceSum(mine).ok());
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], n * max[i]) << i;
}

// Device all-gather in rank order; rejected arguments move nothing and leave the group usable.
inline void AllGatherConcatenatesInRankOrder(Communicator& nccl, const DeviceSession& session) {
  const OpContext& ctx = session.context();
  const int n = nccl.size(), me = nccl.rank();
  const std::vector<float> mine = {static_cast<float>(me), static_cast<float>(10 * me)};
  Tensor in = OnDevice(session, {2}, mine);
  Tensor out(Shape{2 * static_cast<int64_t>(n)}, DType::kF32, session.allocator());
  ASSERT_TRUE(nccl.AllGather(ctx, in.view(), out.view()).ok());
  Tensor all = out.ToHost();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(all.data()[2 * r], r);
    EXPECT_EQ(all.data()[2 * r + 1], 10 * r);
  }
  Tensor wrong(Shape{3}, DType::kF32, session.allocator());
  EXPECT_EQ(nccl.AllGather(ctx, in.view(), wrong.view()).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor on_host({2});
  EXPECT_EQ(nccl.AllReduceSum(ctx, on_host.view()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nccl.AllReduceSum(OpContext(), out.view()).code(),
            absl::StatusCode::kInvalidArgument);  // a host context
  EXPECT_TRUE(nccl.AllGather(ctx, in.view(), out.view()).ok());
}

// Host values go through the group's host group.
inline void HostCallsGoThroughTheHostGroup(Communicator& nccl) {
  const int n = nccl.size(), me = nccl.rank();
  std::vector<double> sum = {static_cast<double>(me), 1.0}, max = {static_cast<double>(me)};
  ASSERT_TRUE(nccl.AllReduceSum(sum).ok());
  EXPECT_EQ(sum, (std::vector<double>{n * (n - 1) / 2.0, static_cast<double>(n)}));
  ASSERT_TRUE(nccl.AllReduceMax(max).ok());
  EXPECT_EQ(max[0], n - 1);
  std::vector<uint8_t> bytes(5, static_cast<uint8_t>(me));
  if (me == n - 1) bytes = {1, 2, 3, 4, 5};
  ASSERT_TRUE(nccl.Broadcast(bytes, n - 1).ok());
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(nccl.Barrier().ok());
}

// Stalls the stream it is queued on (a peer that never arrives looks the same to the waiting
// rank): the collective queued behind it cannot complete within the group's timeout.
inline void CUDART_CB Stall(void* seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(*static_cast<const int*>(seconds)));
}

// A second group made by make_group(timeout) on the same session breaks when a collective
// outlasts its timeout (every later call refused, host calls too); `nccl`, the first group,
// still works once the stream drains.
inline void ACollectiveThatOutlastsItsTimeoutBreaksTheGroup(
    Communicator& nccl, const DeviceSession& session,
    const std::function<StatusOr<std::unique_ptr<Communicator>>(std::chrono::seconds)>&
        make_group) {
  const OpContext& ctx = session.context();
  // Long enough for NCCL to form the group; the stall ends soon after, so the abort that the
  // timeout triggers never waits long for the stream.
  constexpr std::chrono::seconds kShort{5};
  static int stall_seconds = static_cast<int>(kShort.count()) + 2;  // outlives the stream's work
  auto group = make_group(kShort);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& c = **group;
  Tensor x = OnDevice(session, {4}, std::vector<float>{1, 2, 3, 4});
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(ctx.stream), Stall, &stall_seconds),
            cudaSuccess);
  const Status timed_out = c.AllReduceSum(ctx, x.view());
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_THAT(timed_out.message(), ::testing::HasSubstr("AllReduceSum"));
  EXPECT_EQ(c.AllReduceSum(ctx, x.view()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.AllGather(ctx, x.view(), x.view()).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<double> v = {1.0};
  EXPECT_EQ(c.AllReduceSum(v).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Barrier().code(), absl::StatusCode::kFailedPrecondition);
  group->reset();
  EXPECT_TRUE(session.Synchronize().ok());
  EXPECT_TRUE(nccl.AllReduceSum(ctx, x.view()).ok());
}

}  // namespace ripplekv::kernels::nccl_checks
