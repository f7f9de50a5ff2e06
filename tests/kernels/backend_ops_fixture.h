#pragma once
// Shared pieces of the backend cross-check (backend_ops_*test.cc, one binary, label gpu): random
// inputs, the NMSE measure, and the fixture that opens a session on the first CUDA device or
// skips, saying why, when there is none.

#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "kernels/tensor/tensor.h"
#include "kernels/ops/devices.h"
#include "tests/kernels/nmse.h"

namespace ripplekv::kernels {

inline Tensor Random(Shape shape, uint64_t seed, float scale = 1.0f) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : t.span()) v = n(rng);
  return t;
}

// One device of the machine; the fixture skips when there is none.
class BackendOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount(Device::kCuda) == 0) {
      GTEST_SKIP() << "no CUDA device: " << DeviceUnavailableReason(Device::kCuda);
    }
    auto session = DeviceSession::Open({Device::kCuda, 0}, 1);
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(std::move(*session));
    device_ = &session_->allocator();
  }
  OpContext cpu() const { return {.device = Device::kCpu, .num_threads = 2}; }
  // The session's context: its stream, cuBLAS handle and workspace.
  const OpContext& cuda() const { return session_->context(); }
  std::optional<DeviceSession> session_;
  Allocator* device_ = nullptr;
};

}  // namespace ripplekv::kernels
