// Tensor parallelism on 2 CUDA devices with the ranks as threads of one process (label gpu; no
// MPI: the device bundle runs it, docs/DEVICE.md): each thread opens cuda:rank, forms the NCCL
// group over a thread group (kernels/comm/thread_group.h) and runs its shard, against the whole
// model on the CPU (tests/worker/engine/tp_split_check.h, as tp_device_test under mpirun). Skips,
// saying why, without 2 GPUs.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "kernels/comm/nccl_api.h"
#include "kernels/comm/nccl_communicator.h"
#include "kernels/comm/thread_group.h"
#include "tests/worker/engine/tp_split_check.h"

namespace ripplekv::worker {
namespace {

using kernels::Device;

TEST(TensorParallelThreadsDeviceTest, ASplitOverTwoGpusMatchesTheWholeModelOnTheCpu) {
  constexpr int kRanks = 2;
  constexpr std::chrono::seconds kTimeout{120};
  if (kernels::DeviceCount(Device::kCuda) < kRanks) {
    GTEST_SKIP() << kRanks << " ranks need " << kRanks << " CUDA devices, found "
                 << kernels::DeviceCount(Device::kCuda) << " ("
                 << kernels::DeviceUnavailableReason(Device::kCuda) << ")";
  }
  std::string why;
  if (kernels::nccl::Nccl(&why) == nullptr) GTEST_SKIP() << why;
  auto host = kernels::ThreadGroup(kRanks, kTimeout);
  ASSERT_TRUE(host.ok()) << host.status();
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      auto session = kernels::DeviceSession::Open({Device::kCuda, r}, 1);
      ASSERT_TRUE(session.ok()) << session.status();
      auto nccl = kernels::NcclGroup(*(*host)[r], *session, kTimeout);
      ASSERT_TRUE(nccl.ok()) << nccl.status();
      tp_split_check::ExpectSplitMatchesTheWholeModel(*session, **nccl);
    });
  }
  for (std::thread& t : ranks) t.join();
}

}  // namespace
}  // namespace ripplekv::worker
