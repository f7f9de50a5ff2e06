#pragma once
// The data types of CUDA's libraries (library_types.h), for the host emulation's cuBLAS
// (tests/cuda_host/cublas.cc). The toolkit's numbers.

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16BF = 14,
} cudaDataType;
