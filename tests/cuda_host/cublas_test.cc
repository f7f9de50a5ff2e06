// The emulation's cuBLAS (tests/cuda_host/cublas.cc) keeps cuBLAS's GEMM contract, loaded the way
// the backend loads the real library (kernels/ops/cuda/cublas_api.h: dlopen by soname):
// column-major operands with leading dimensions larger than their rows, every transa/transb pair,
// alpha and beta, a C that is not read when beta is 0, bf16 inputs, and its argument checks.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ops/cuda/cublas_api.h"

namespace ripplekv::cuda_host {
namespace {

using kernels::cuda::Cublas;
using kernels::cuda::CublasApi;

// Column-major X (rows x cols, leading dimension ld) with distinct small integers (exact sums).
std::vector<float> Matrix(int rows, int cols, int ld, int seed) {
  std::vector<float> x(static_cast<size_t>(ld) * cols, std::numeric_limits<float>::quiet_NaN());
  for (int c = 0; c < cols; ++c) {
    for (int r = 0; r < rows; ++r)
      x[static_cast<size_t>(r + c * ld)] = ((r * 7 + c * 3 + seed) % 11) - 5;
  }
  return x;
}

class CublasFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    api_ = Cublas(&why);
    ASSERT_NE(api_, nullptr) << why;
    ASSERT_EQ(api_->create(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle_ != nullptr) api_->destroy(handle_);
  }
  const CublasApi* api_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

TEST_F(CublasFakeTest, GemmHonoursTransposesLeadingDimensionsAlphaAndBeta) {
  const int m = 5, n = 3, k = 4;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      // A holds op(A) (m x k) transposed or not, with two rows of padding per column.
      const int a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_rows + 2;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_rows + 1;
      const int ldc = m + 3;
      const std::vector<float> a = Matrix(a_rows, a_cols, lda, 1),
                               b = Matrix(b_rows, b_cols, ldb, 2);
      std::vector<float> c = Matrix(m, n, ldc, 3);
      const std::vector<float> c0 = c;
      const float alpha = 2.0f, beta = -0.5f;
      ASSERT_EQ(api_->gemm_ex(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                              tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a.data(), CUDA_R_32F,
                              lda, b.data(), CUDA_R_32F, ldb, &beta, c.data(), CUDA_R_32F, ldc,
                              CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
          double dot = 0;
          for (int l = 0; l < k; ++l) {
            const float av =
                ta ? a[static_cast<size_t>(l + i * lda)] : a[static_cast<size_t>(i + l * lda)];
            const float bv =
                tb ? b[static_cast<size_t>(j + l * ldb)] : b[static_cast<size_t>(l + j * ldb)];
            dot += static_cast<double>(av) * bv;
          }
          EXPECT_EQ(c[static_cast<size_t>(i + j * ldc)],
                    alpha * dot + beta * c0[static_cast<size_t>(i + j * ldc)])
              << "transa " << ta << " transb " << tb << " at " << i << ", " << j;
        }
        for (int i = m; i < ldc; ++i) {
          EXPECT_TRUE(std::isnan(c[static_cast<size_t>(i + j * ldc)])) << "padding is not written";
        }
      }
    }
  }
}

TEST_F(CublasFakeTest, ZeroBetaNeverReadsC) {
  const std::vector<float> a = Matrix(2, 2, 2, 0), b = Matrix(2, 2, 2, 1);
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN());
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(api_->gemm_ex(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a.data(), CUDA_R_32F,
                          2, b.data(), CUDA_R_32F, 2, &beta, c.data(), CUDA_R_32F, 2,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  for (float v : c) EXPECT_FALSE(std::isnan(v));
}

TEST_F(CublasFakeTest, Bf16InputsAreReadAsBf16) {
  // 1.5 and -3.0 in bf16: 0x3fc0 and 0xc040.
  const std::vector<uint16_t> a = {0x3fc0, 0xc040}, b = {0x3fc0, 0x3fc0};
  float c = 0.0f;
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(api_->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 2, &alpha, a.data(), CUDA_R_16BF,
                          2, b.data(), CUDA_R_16BF, 2, &beta, &c, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(c, 1.5f * 1.5f - 3.0f * 1.5f);
}

TEST_F(CublasFakeTest, BadArgumentsAreRefusedLikeCublas) {
  std::vector<float> x(16, 1.0f);
  const float one = 1.0f;
  auto gemm = [&](int m, int lda, cudaDataType a_type, cublasComputeType_t compute) {
    return api_->gemm_ex(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, 2, 2, &one, x.data(), a_type, lda,
                         x.data(), CUDA_R_32F, 2, &one, x.data(), CUDA_R_32F, 4, compute,
                         CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(3, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE) << "lda < m";
  EXPECT_EQ(gemm(-1, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(2, 2, CUDA_R_16BF, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED)
      << "mixed input types";
  EXPECT_EQ(gemm(2, 2, CUDA_R_32F, CUBLAS_COMPUTE_64F), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(api_->gemm_ex(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, x.data(), CUDA_R_32F, 2,
                          x.data(), CUDA_R_32F, 2, &one, x.data(), CUDA_R_32F, 2,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

}  // namespace
}  // namespace ripplekv::cuda_host
