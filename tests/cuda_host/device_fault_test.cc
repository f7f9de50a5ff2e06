// A device fault on the emulated CUDA backend: the first CUDA error is recorded as the process's
// device fault, the op that meets it and every later op fail with Unavailable naming it, a failed
// copy to the host leaves NaN bytes rather than plausible values, and the session's Synchronize
// fails too (kernels/ops/cuda/cuda_device.h). One binary of its own, since a fault is
// process-wide and permanent. It runs with RIPPLEKV_CUDA_SYNC=1 (set before the first launch):
// ops then synchronize after every kernel and still compute the same values.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/ops/cuda/cuda_device.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/norm.h"
#include "kernels/tensor/tensor.h"

namespace ripplekv::kernels {
namespace {

using ::testing::HasSubstr;

TEST(DeviceFaultTest, TheFirstFaultFailsEveryLaterOpAndTheSessionWithItsCause) {
  ASSERT_EQ(setenv("RIPPLEKV_CUDA_SYNC", "1", 1), 0);
  ASSERT_TRUE(cuda::SyncEveryLaunch());
  auto opened = DeviceSession::Open({Device::kCuda, 0}, 1);
  ASSERT_TRUE(opened.ok()) << opened.status();
  DeviceSession& session = *opened;
  Allocator& device = session.allocator();

  Tensor x_host({2, 8});
  for (int64_t i = 0; i < x_host.numel(); ++i) x_host.span()[i] = 0.25f * static_cast<float>(i + 1);
  Tensor w_host({8});
  for (float& v : w_host.span()) v = 1.0f;
  const Tensor x = x_host.CopyTo(device), w = w_host.CopyTo(device);
  Tensor y({2, 8}, DType::kF32, device);
  const OpContext cpu{.device = Device::kCpu, .num_threads = 1};
  Tensor want({2, 8});
  ASSERT_TRUE(RmsNorm(cpu, x_host.view(), w_host.view(), 1e-6f, want.view()).ok());
  ASSERT_TRUE(RmsNorm(session.context(), x.view(), w.view(), 1e-6f, y.view()).ok());
  const Tensor got = y.ToHost();
  for (int64_t i = 0; i < got.numel(); ++i) {
    EXPECT_NEAR(got.span()[i], want.span()[i], 1e-6f * std::abs(want.span()[i])) << i;
  }
  EXPECT_EQ(DeviceFault(), "");

  // A copy whose device side is not device memory: the runtime refuses it.
  std::vector<float> host_src(4, 1.0f), host_dst(4, 1.0f);
  device.CopyToHost(host_dst.data(), host_src.data(), sizeof(float) * host_dst.size());
  for (const float v : host_dst) EXPECT_TRUE(std::isnan(v)) << "a failed copy leaves NaN";
  const std::string fault = DeviceFault();
  EXPECT_THAT(fault, HasSubstr("copy to the host: "));

  const Status later = RmsNorm(session.context(), x.view(), w.view(), 1e-6f, y.view());
  EXPECT_TRUE(absl::IsUnavailable(later)) << later;
  EXPECT_THAT(later.message(), HasSubstr("RmsNorm: device fault: " + fault));
  const Status synced = session.Synchronize();
  EXPECT_TRUE(absl::IsUnavailable(synced)) << synced;
  EXPECT_THAT(synced.message(), HasSubstr(fault));
  EXPECT_EQ(DeviceFault(), fault) << "the first fault is kept";
}

}  // namespace
}  // namespace ripplekv::kernels
