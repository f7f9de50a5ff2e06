// The device's linear layer (cuBLAS, kernels/ops/cuda/linear.cu) and weight upload
// (kernels/ops/upload.h) against the CPU: fp32 weights (the exactness mode) and bf16 weights (the
// default), with and without bias and the accumulate (residual) form, over single rows, odd
// widths and the shapes of the real projections. Without a device every case skips.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/dequant/dequant.h"
#include "kernels/dequant/quantize.h"
#include "kernels/ops/linear.h"
#include "kernels/ops/upload.h"
#include "tests/kernels/backend_ops_fixture.h"

namespace ripplekv::kernels {
namespace {

// [M, N, K]: one row (decode), odd sizes, an empty batch, projection shapes of SmolLM2 and a
// 128-row block of an 8B layer's down projection.
struct GemmShape {
  int64_t m, n, k;
};
const std::vector<GemmShape> kGemmShapes = {
    {1, 64, 64}, {7, 33, 96}, {5, 1000, 576}, {0, 64, 64}, {32, 1536, 576}, {128, 4096, 1024}};

// A Q8_0 weight [n, k] (k a multiple of 32) stored as the file would hold it.
Weight StoredWeight(int64_t n, int64_t k, uint64_t seed) {
  const Tensor values = Random({n, k}, seed, 0.05f);
  auto bytes = std::make_shared<std::vector<uint8_t>>(*GgmlBytes(GgmlType::kQ8_0, n * k));
  EXPECT_TRUE(QuantizeRow(GgmlType::kQ8_0, values.span(), *bytes).ok());
  auto w = Weight::Stored(GgmlType::kQ8_0, *bytes, {n, k}, bytes);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

TEST_F(BackendOpsTest, LinearOverFp32WeightsMatchesTheCpu) {
  // Pedantic fp32 GEMM: the same products, summed in another order (a few ulp per output).
  constexpr double kTolerance = 1e-11;
  for (const auto& [m, n, k] : kGemmShapes) {
    for (const bool with_bias : {false, true}) {
      for (const bool accumulate : {false, true}) {
        const Tensor x = Random({m, k}, 1), w = Random({n, k}, 2, 0.05f);
        const Tensor bias = with_bias ? Random({n}, 3) : Tensor();
        const Tensor y0 = Random({m, n}, 4);
        Tensor want = y0.Clone();
        const ConstTensorView host_bias = with_bias ? bias.view() : ConstTensorView();
        ASSERT_TRUE(Linear(cpu(), x.view(), w.view(), host_bias, want.view(),
                           {.accumulate = accumulate})
                        .ok());
        const Tensor dx = x.CopyTo(*device_), dw = w.CopyTo(*device_);
        const Tensor dbias = bias.CopyTo(*device_);
        Tensor dy = y0.CopyTo(*device_);
        const ConstTensorView device_bias = with_bias ? dbias.view() : ConstTensorView();
        ASSERT_TRUE(Linear(cuda(), dx.view(), dw.view(), device_bias, dy.view(),
                           {.accumulate = accumulate})
                        .ok());
        EXPECT_LE(Nmse(dy.ToHost(), want), kTolerance)
            << "[" << m << ", " << n << ", " << k << "] bias " << with_bias << " accumulate "
            << accumulate;
      }
    }
  }
}

TEST_F(BackendOpsTest, LinearOverUploadedWeightsMatchesTheCpu) {
  // f32 uploads hold the CPU's expanded values exactly; bf16 uploads round weights and inputs to
  // 8 significant bits (relative error 2^-9 each), so the NMSE of a product of random signs is
  // about 2 * (2^-9)^2 / 3 ~ 2.5e-6: 1e-5 leaves room without hiding a wrong layout.
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const double tolerance = dtype == DType::kF32 ? 1e-11 : 1e-5;
    for (const auto& [m, n, k] : kGemmShapes) {
      const int64_t k32 = (k + 31) / 32 * 32;  // whole Q8_0 blocks
      const Weight w = StoredWeight(n, k32, 5);
      const Tensor x = Random({m, k32}, 6), bias = Random({n}, 7);
      Tensor want({m, n});
      ASSERT_TRUE(Linear(cpu(), x.view(), w, bias.view(), want.view()).ok());
      auto uploaded = UploadWeight(*session_, w, dtype);
      ASSERT_TRUE(uploaded.ok()) << uploaded.status();
      EXPECT_EQ(uploaded->device(), Device::kCuda);
      EXPECT_EQ(uploaded->shape(), w.shape());
      const Tensor dx = x.CopyTo(*device_), dbias = bias.CopyTo(*device_);
      Tensor dy({m, n}, DType::kF32, *device_);
      ASSERT_TRUE(Linear(cuda(), dx.view(), *uploaded, dbias.view(), dy.view()).ok());
      EXPECT_LE(Nmse(dy.ToHost(), want), tolerance)
          << DTypeName(dtype) << " [" << m << ", " << n << ", " << k32 << "]";
    }
  }
}

TEST_F(BackendOpsTest, AHostWeightOnADeviceContextIsRefusedNamingBoth) {
  const Weight w = StoredWeight(4, 32, 8);
  Tensor dx({1, 32}, DType::kF32, *device_), dy({1, 4}, DType::kF32, *device_);
  const Status s = Linear(cuda(), dx.view(), w, {}, dy.view());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the weight is on cpu, the op runs on cuda"), std::string::npos) << s;
}

}  // namespace
}  // namespace ripplekv::kernels
