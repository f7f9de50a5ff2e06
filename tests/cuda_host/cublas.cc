// The host emulation's cuBLAS (tests/cuda_host): a shared library named like the real one
// (libcublas.so.<major>), which the backend's loader (kernels/ops/cuda/cublas_api.cc) opens with
// dlopen and resolves by name as it would the real one. It keeps cuBLAS's contracts: column-major
// operands with leading dimensions, transa/transb, host-pointer alpha and beta, C not read when
// beta is 0, and its argument checks (CUBLAS_STATUS_INVALID_VALUE, _NOT_SUPPORTED). The GEMM is
// computed naively on the host: inputs widened to float (bf16 exactly; under
// CUBLAS_COMPUTE_32F_FAST_TF32 first rounded to TF32, as tensor cores may), products summed in
// double, the result rounded once to C's type. The stream is ignored: the emulated runtime has
// finished every earlier call when this one runs.

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBf16(float f) {  // to nearest even; NaN stays NaN
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float RoundToTf32(float f) {  // 10 mantissa bits, to nearest even
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u) return f;
  bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float Load(const void* base, cudaDataType type, int64_t index) {
  if (type == CUDA_R_16BF) return Bf16ToFloat(static_cast<const uint16_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

// op(X) as rows x depth floats, row r contiguous: X is column-major with leading dimension ld,
// op(X)(r, l) = X(r, l) for N, X(l, r) otherwise.
std::vector<float> RowsOf(const void* x, cudaDataType type, int ld, bool transposed, int rows,
                          int depth, bool tf32) {
  std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(depth));
  for (int r = 0; r < rows; ++r) {
    for (int l = 0; l < depth; ++l) {
      const int64_t at =
          transposed ? l + static_cast<int64_t>(r) * ld : r + static_cast<int64_t>(l) * ld;
      const float v = Load(x, type, at);
      out[static_cast<size_t>(r) * depth + l] = tf32 ? RoundToTf32(v) : v;
    }
  }
  return out;
}

double Dot(const float* a, const float* b, int n) {
  double s[4] = {0, 0, 0, 0};  // four chains: the order of a double sum of floats hardly matters
  int l = 0;
  for (; l + 4 <= n; l += 4) {
    for (int u = 0; u < 4; ++u) s[u] += static_cast<double>(a[l + u]) * b[l + u];
  }
  for (; l < n; ++l) s[0] += static_cast<double>(a[l]) * b[l];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

bool ValidOp(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && bytes > 0) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown error";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (!ValidOp(transa) || !ValidOp(transb) || m < 0 || n < 0 || k < 0 || alpha == nullptr ||
      beta == nullptr || lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) ||
      ldc < std::max(1, m) || algo != CUBLAS_GEMM_DEFAULT) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool float_compute = computeType == CUBLAS_COMPUTE_32F ||
                             computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
                             computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool inputs = Atype == Btype && (Atype == CUDA_R_32F || Atype == CUDA_R_16BF);
  const bool output = Ctype == CUDA_R_32F || (Ctype == CUDA_R_16BF && Atype == CUDA_R_16BF);
  const bool tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!float_compute || !inputs || !output || (tf32 && Atype != CUDA_R_32F)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const double a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const std::vector<float> rows = RowsOf(A, Atype, lda, ta, m, k, tf32);   // op(A), m x k
  const std::vector<float> cols = RowsOf(B, Btype, ldb, !tb, n, k, tf32);  // op(B)^T, n x k
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const double dot =
          k > 0 ? Dot(&rows[static_cast<size_t>(i) * k], &cols[static_cast<size_t>(j) * k], k)
                : 0.0;
      const int64_t at = i + static_cast<int64_t>(j) * ldc;
      double value = a * dot;
      if (b != 0.0) value += b * Load(C, Ctype, at);
      if (Ctype == CUDA_R_16BF) {
        static_cast<uint16_t*>(C)[at] = FloatToBf16(static_cast<float>(value));
      } else {
        static_cast<float*>(C)[at] = static_cast<float>(value);
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
