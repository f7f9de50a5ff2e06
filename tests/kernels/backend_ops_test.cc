// Every op with a device kernel, on every device this machine has, against the CPU over a table of
// shapes (in the spirit of ggml's test-backend-ops): the same inputs go through the CPU and the
// device, and the normalized mean squared error of the device's output against the CPU's,
// NMSE = sum (dev - cpu)^2 / sum cpu^2, must stay under the op's stated tolerance. Without a device
// every case skips and says why (label gpu; CI has no GPU).

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/ops/activation.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/norm.h"

namespace ripplekv::kernels {
namespace {

Tensor Random(Shape shape, uint64_t seed, float scale = 1.0f) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : t.span()) v = n(rng);
  return t;
}

double Nmse(const Tensor& got, const Tensor& want) {
  double err = 0.0, ref = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = static_cast<double>(got.data()[i]) - want.data()[i];
    err += d * d;
    ref += static_cast<double>(want.data()[i]) * want.data()[i];
  }
  return ref == 0.0 ? err : err / ref;
}

// One device of the machine; the fixture skips when there is none.
class BackendOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount(Device::kCuda) == 0) {
      GTEST_SKIP() << "no CUDA device: " << DeviceUnavailableReason(Device::kCuda);
    }
    auto allocator = DeviceAllocator({Device::kCuda, 0});
    ASSERT_TRUE(allocator.ok()) << allocator.status();
    device_ = *allocator;
  }
  OpContext cpu() const { return {.device = Device::kCpu, .num_threads = 2}; }
  OpContext cuda() const { return {.device = Device::kCuda}; }
  Allocator* device_ = nullptr;
};

// Rows x width: single rows, odd widths, widths past one block of threads, an empty input.
const std::vector<std::pair<int64_t, int64_t>> kRowShapes = {
    {1, 64}, {7, 576}, {33, 4096}, {3, 1}, {5, 1000}, {0, 128}};

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

}  // namespace
}  // namespace ripplekv::kernels
