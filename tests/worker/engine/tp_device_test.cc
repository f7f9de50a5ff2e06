// Tensor parallelism on CUDA devices (labels mpi and gpu): 2 ranks under mpirun, each on its own
// GPU with an NCCL group, against the whole model on the CPU: logits, the vocabulary-parallel KL
// and a calibration task (fp32 weights on the devices). Skips, saying why, without a GPU per rank.

#include <gtest/gtest.h>

#include <chrono>

#include "kernels/comm/mpi_communicator.h"
#include "kernels/comm/nccl_communicator.h"
#include "tests/worker/engine/tp_split_check.h"

namespace ripplekv::worker {
namespace {

using kernels::Device;

TEST(TensorParallelDeviceTest, ASplitOverGpusMatchesTheWholeModelOnTheCpu) {
  kernels::MpiRuntime& runtime = **kernels::MpiRuntime::Init(nullptr, nullptr);
  const int size = runtime.world_size();
  // Every rank decides the same way, so either all skip or none does.
  if (kernels::DeviceCount(Device::kCuda) < size) {
    GTEST_SKIP() << size << " ranks need " << size << " CUDA devices on this node, found "
                 << kernels::DeviceCount(Device::kCuda) << " ("
                 << kernels::DeviceUnavailableReason(Device::kCuda) << ")";
  }
  auto session = kernels::DeviceSession::Open({Device::kCuda, runtime.local_rank()}, 1);
  ASSERT_TRUE(session.ok()) << session.status();
  auto host = kernels::MpiGroup(runtime, size, std::chrono::seconds(120));
  ASSERT_TRUE(host.ok());
  auto nccl = kernels::NcclGroup(runtime, **host, *session, std::chrono::seconds(120));
  ASSERT_TRUE(nccl.ok()) << nccl.status();

  tp_split_check::ExpectSplitMatchesTheWholeModel(*session, **nccl);
}

}  // namespace
}  // namespace ripplekv::worker
