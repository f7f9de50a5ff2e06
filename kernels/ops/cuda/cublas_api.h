#pragma once
// cuBLAS, loaded with dlopen on the first device session rather than linked: mapping and
// relocating cuBLAS costs every process ~140 MiB of resident memory, and most RippleKV processes
// (scheduler, CPU workers, tools) never touch a GPU. Internal to the CUDA backend.

#include <cublas_v2.h>

#include <string>

namespace ripplekv::kernels::cuda {

// cublasGemmEx's C entry point (C++ also sees an inline overload taking a cudaDataType compute
// type, so decltype cannot name it).
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                          int, int, const void*, const void*, cudaDataType, int,
                                          const void*, cudaDataType, int, const void*, void*,
                                          cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points the backend calls, with cuBLAS's own signatures.
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSetMathMode) set_math_mode;
  CublasGemmExFn gemm_ex;
  decltype(&cublasGetStatusString) status_string;
};

// The cuBLAS library of a CUDA runtime version (cudaRuntimeGetVersion: 1000 * major + 10 * minor):
// the soname of the runtime's major version only ("libcublas.so.13" for 13000), since a cuBLAS of
// another major version does not work with this runtime (an unversioned libcublas.so may be one).
std::string CublasLibraryFor(int runtime_version);

// The loaded library (loaded once per process, thread-safe), or null with the loader's reason in
// *why (no cuBLAS of the runtime's major version on the library path, with the loader's words
// for it, or a symbol missing).
const CublasApi* Cublas(std::string* why);

}  // namespace ripplekv::kernels::cuda
