// The NCCL communicator (kernels/comm/nccl_communicator.h) with its ranks as threads of one
// process over a thread group (kernels/comm/thread_group.h), label gpu: no MPI and no launcher,
// how the device bundle (docs/DEVICE.md) runs NCCL's collectives on a GPU machine without MPI.
// Everywhere: a group refuses a host session on every rank alike. With a CUDA device per rank, on
// 1 rank and on 2 (cuda:0 and cuda:1): the device collectives against values every rank can
// compute, the host calls, and a collective that outlasts its timeout breaking the group. Device
// cases skip, saying why, without a device for every rank (the 2-rank ones on a 1-GPU machine).

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
#include "tests/kernels/nccl_checks.h"

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
    nccl_checks::AllReduceSumGivesEveryRankTheSameSum(rank.nccl, rank.session);
  });
}

TEST_P(NcclThreadsDeviceTest, AllGatherConcatenatesInRankOrder) {
  Run([](Rank& rank) { nccl_checks::AllGatherConcatenatesInRankOrder(rank.nccl, rank.session); });
}

TEST_P(NcclThreadsDeviceTest, HostCallsGoThroughTheThreadGroup) {
  Run([](Rank& rank) { nccl_checks::HostCallsGoThroughTheHostGroup(rank.nccl); });
}

TEST_P(NcclThreadsDeviceTest, ACollectiveThatOutlastsItsTimeoutBreaksTheGroup) {
  Run([](Rank& rank) {
    nccl_checks::ACollectiveThatOutlastsItsTimeoutBreaksTheGroup(
        rank.nccl, rank.session,
        [&](std::chrono::seconds timeout) { return NcclGroup(rank.host, rank.session, timeout); });
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclThreadsDeviceTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return Cat(info.param, info.param == 1 ? "Rank" : "Ranks");
                         });

}  // namespace
}  // namespace ripplekv::kernels
