#include "kernels/ops/cuda/cublas_api.h"

#include <cuda_runtime_api.h>

#include <string>

#include "base/dynamic_library.h"

namespace ripplekv::kernels::cuda {

namespace {

struct Loaded {
  CublasApi api{};
  bool ok = false;
  std::string why;
};

Loaded Load() {
  Loaded loaded;
  int runtime = 0;
  if (cudaError_t e = cudaRuntimeGetVersion(&runtime); e != cudaSuccess) {
    loaded.why = std::string("cannot load cuBLAS: the CUDA runtime's version is unknown (") +
                 cudaGetErrorString(e) + ")";
    return loaded;
  }
  const std::string name = CublasLibraryFor(runtime);
  void* library = OpenFirstLibrary({name.c_str()}, "cuBLAS", &loaded.why);
  if (library == nullptr) {
    loaded.why += " (cuBLAS must match the CUDA runtime's major version " +
                  std::to_string(runtime / 1000) +
                  "; put its folder, e.g. a CUDA toolkit's lib64 or a Python wheel's "
                  "nvidia/cublas/lib, on LD_LIBRARY_PATH)";
    return loaded;
  }
  CublasApi& a = loaded.api;
  auto resolve = [&](const char* symbol, auto* fn) {
    return ResolveSymbol(library, symbol, fn, "cuBLAS", &loaded.why);
  };
  loaded.ok = resolve("cublasCreate_v2", &a.create) && resolve("cublasDestroy_v2", &a.destroy) &&
              resolve("cublasSetStream_v2", &a.set_stream) &&
              resolve("cublasSetWorkspace_v2", &a.set_workspace) &&
              resolve("cublasSetMathMode", &a.set_math_mode) &&
              resolve("cublasGemmEx", &a.gemm_ex) &&
              resolve("cublasGetStatusString", &a.status_string);
  return loaded;  // the library stays loaded for the process
}

}  // namespace

std::string CublasLibraryFor(int runtime_version) {
  return "libcublas.so." + std::to_string(runtime_version / 1000);
}

const CublasApi* Cublas(std::string* why) {
  static const Loaded loaded = Load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

}  // namespace ripplekv::kernels::cuda
