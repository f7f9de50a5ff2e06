// The NCCL communicator (kernels/comm/nccl_communicator.h) with its ranks as threads of one
// process over a thread group (kernels/comm/thread_group.h), label gpu: no MPI and no launcher,
// how the device bundle (docs/DEVICE.md) runs NCCL's collectives on a GPU machine without MPI.
// Everywhere: a group refuses a host session on every rank alike. With a CUDA device per rank, on
// 1 rank and on 2 (cuda:0 and cuda:1): the device collectives against values every rank can
// compute, the host calls, and a collective that outlasts its timeout breaking the group. Device
// cases skip, saying why, without a device for every rank (the 2-rank ones on a 1-GPU machine).

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "kernels/comm/nccl_api.h"
#include "kernels/comm/nccl_communicator.h"
#include "kernels/comm/thread_group.h"

namespace ripplekv::kernels {
namespace {

using ::testing::HasSubstr;

constexpr std::chrono::seconds kTimeout{60};

std::vector<std::unique_ptr<Communicator>> HostGroup(int size) {
  auto group = ThreadGroup(size, kTimeout);
  EXPECT_TRUE(group.ok()) << group.status();
  return std::move(*group);
}

// Runs body(rank) on one thread per rank, together, and waits for all.
void OnRanks(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

Tensor OnDevice(const DeviceSession& session, const Shape& shape, std::span<const float> values) {
  return Tensor(shape, values).CopyTo(session.allocator());
}

TEST(NcclThreadsTest, AGroupRefusesAHostSessionOnEveryRank) {
  auto host = HostGroup(2);
  OnRanks(2, [&](int r) {
    auto session = DeviceSession::Open({Device::kCpu, 0}, 1);
    ASSERT_TRUE(session.ok()) << session.status();
    auto group = NcclGroup(*host[r], *session, kTimeout);
    EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition) << group.status();
    EXPECT_THAT(group.status().message(), HasSubstr(Cat("NCCL group, rank ", r, " of 2: ")));
    EXPECT_THAT(group.status().message(),
                HasSubstr(nccl::Nccl(nullptr) != nullptr ? "not a CUDA device" : "NCCL"));
    // Every rank refused after the same host calls: the host group is still in step.
    EXPECT_TRUE(host[r]->Barrier().ok());
  });
}

// One rank's view inside a device case: its host group, its session on cuda:rank and its NCCL
// group, all made and destroyed on the rank's own thread.
struct Rank {
  Communicator& host;
  DeviceSession& session;
  Communicator& nccl;
  const OpContext& ctx() const { return session.context(); }
};

// The parameter is the number of ranks.
class NcclThreadsDeviceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const int size = GetParam();
    const int count = DeviceCount(Device::kCuda);
    if (count == 0) GTEST_SKIP() << "no CUDA device: " << DeviceUnavailableReason(Device::kCuda);
    if (count < size) GTEST_SKIP() << count << " CUDA device(s) for " << size << " ranks";
    std::string why;
    if (nccl::Nccl(&why) == nullptr) GTEST_SKIP() << why;
    host_ = HostGroup(size);
  }

  // Runs body on every rank, each rank on its own thread and device.
  void Run(const std::function<void(Rank&)>& body) {
    OnRanks(GetParam(), [&](int r) {
      auto session = DeviceSession::Open({Device::kCuda, r}, 1);
      ASSERT_TRUE(session.ok()) << session.status();
      auto nccl = NcclGroup(*host_[r], *session, kTimeout);
      ASSERT_TRUE(nccl.ok()) << nccl.status();
      Rank rank{*host_[r], *session, **nccl};
      body(rank);
    });
  }

  std::vector<std::unique_ptr<Communicator>> host_;
};

TEST_P(NcclThreadsDeviceTest, AllReduceSumGivesEveryRankTheSameSum) {
  Run([](Rank& rank) {
    const int n = rank.nccl.size(), me = rank.nccl.rank();
    // Small integers: every summation order gives the exact sum.
    std::vector<float> values(15);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(me + 1 + i);
    Tensor x = OnDevice(rank.session, {3, 5}, values);
    ASSERT_TRUE(rank.nccl.AllReduceSum(rank.ctx(), x.view()).ok());
    Tensor sum = x.ToHost();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(sum.data()[i], static_cast<float>(n * (n + 1) / 2 + n * i)) << i;
    }
    // Values whose float sum depends on the order: whatever NCCL's order, all ranks hold the
    // same bits, so the sum over ranks of each value is size() times its maximum.
    std::vector<float> uneven(64);
    for (size_t i = 0; i < uneven.size(); ++i) {
      uneven[i] = me == 0 ? 1e8f + static_cast<float>(i) : 1.0f + me * 1e-3f * i;
    }
    Tensor y = OnDevice(rank.session, {64}, uneven);
    ASSERT_TRUE(rank.nccl.AllReduceSum(rank.ctx(), y.view()).ok());
    Tensor got = y.ToHost();
    std::vector<double> mine(got.data(), got.data() + got.numel()), max = mine;
    ASSERT_TRUE(rank.nccl.AllReduceMax(max).ok());
    ASSERT_TRUE(rank.nccl.AllReduceSum(mine).ok());
    for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], n * max[i]) << i;
  });
}

TEST_P(NcclThreadsDeviceTest, AllGatherConcatenatesInRankOrder) {
  Run([](Rank& rank) {
    const int n = rank.nccl.size(), me = rank.nccl.rank();
    const std::vector<float> mine = {static_cast<float>(me), static_cast<float>(10 * me)};
    Tensor in = OnDevice(rank.session, {2}, mine);
    Tensor out(Shape{2 * static_cast<int64_t>(n)}, DType::kF32, rank.session.allocator());
    ASSERT_TRUE(rank.nccl.AllGather(rank.ctx(), in.view(), out.view()).ok());
    Tensor all = out.ToHost();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all.data()[2 * r], r);
      EXPECT_EQ(all.data()[2 * r + 1], 10 * r);
    }
    // Rejected arguments move nothing and leave the group usable.
    Tensor wrong(Shape{3}, DType::kF32, rank.session.allocator());
    EXPECT_EQ(rank.nccl.AllGather(rank.ctx(), in.view(), wrong.view()).code(),
              absl::StatusCode::kInvalidArgument);
    Tensor on_host({2});
    EXPECT_EQ(rank.nccl.AllReduceSum(rank.ctx(), on_host.view()).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(rank.nccl.AllGather(rank.ctx(), in.view(), out.view()).ok());
  });
}

TEST_P(NcclThreadsDeviceTest, HostCallsGoThroughTheThreadGroup) {
  Run([](Rank& rank) {
    const int n = rank.nccl.size(), me = rank.nccl.rank();
    std::vector<double> sum = {static_cast<double>(me), 1.0}, max = {static_cast<double>(me)};
    ASSERT_TRUE(rank.nccl.AllReduceSum(sum).ok());
    EXPECT_EQ(sum, (std::vector<double>{n * (n - 1) / 2.0, static_cast<double>(n)}));
    ASSERT_TRUE(rank.nccl.AllReduceMax(max).ok());
    EXPECT_EQ(max[0], n - 1);
    std::vector<uint8_t> bytes(5, static_cast<uint8_t>(me));
    if (me == n - 1) bytes = {1, 2, 3, 4, 5};
    ASSERT_TRUE(rank.nccl.Broadcast(bytes, n - 1).ok());
    EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
    EXPECT_TRUE(rank.nccl.Barrier().ok());
  });
}

// Stalls the stream it is queued on (a peer that never arrives looks the same to the waiting
// rank): the collective queued behind it cannot complete within the group's timeout.
void CUDART_CB Stall(void* seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(*static_cast<const int*>(seconds)));
}

TEST_P(NcclThreadsDeviceTest, ACollectiveThatOutlastsItsTimeoutBreaksTheGroup) {
  Run([](Rank& rank) {
    // Long enough for NCCL to form the group; the stall ends soon after, so the abort that the
    // timeout triggers never waits long for the stream.
    constexpr std::chrono::seconds kShort{5};
    static int stall_seconds = static_cast<int>(kShort.count()) + 2;  // outlives the stream's work
    auto group = NcclGroup(rank.host, rank.session, kShort);
    ASSERT_TRUE(group.ok()) << group.status();
    Communicator& c = **group;
    Tensor x = OnDevice(rank.session, {4}, std::vector<float>{1, 2, 3, 4});
    ASSERT_EQ(
        cudaLaunchHostFunc(static_cast<cudaStream_t>(rank.ctx().stream), Stall, &stall_seconds),
        cudaSuccess);
    const Status timed_out = c.AllReduceSum(rank.ctx(), x.view());
    EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
    EXPECT_THAT(timed_out.message(), HasSubstr("AllReduceSum"));
    // Broken: every later call is refused, host calls too.
    EXPECT_EQ(c.AllReduceSum(rank.ctx(), x.view()).code(), absl::StatusCode::kFailedPrecondition);
    std::vector<double> v = {1.0};
    EXPECT_EQ(c.AllReduceSum(v).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(c.Barrier().code(), absl::StatusCode::kFailedPrecondition);
    group->reset();
    // The stream drains once the stall ends; the first group still works.
    EXPECT_TRUE(rank.session.Synchronize().ok());
    EXPECT_TRUE(rank.nccl.AllReduceSum(rank.ctx(), x.view()).ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclThreadsDeviceTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return Cat(info.param, info.param == 1 ? "Rank" : "Ranks");
                         });

}  // namespace
}  // namespace ripplekv::kernels
