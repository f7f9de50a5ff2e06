#include "kernels/ops/cuda/cublas_api.h"

#include <cstdio>
#include <cstdlib>

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
  void* library = OpenFirstLibrary({"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                                   "cuBLAS", &loaded.why);
  if (library == nullptr) return loaded;
  CublasApi& a = loaded.api;
  auto resolve = [&](const char* symbol, auto* fn) {
    return ResolveSymbol(library, symbol, fn, "cuBLAS", &loaded.why);
  };
  loaded.ok = resolve("cublasCreate_v2", &a.create) &&
              resolve("cublasDestroy_v2", &a.destroy) &&
              resolve("cublasSetStream_v2", &a.set_stream) &&
              resolve("cublasSetWorkspace_v2", &a.set_workspace) &&
              resolve("cublasSetMathMode", &a.set_math_mode) &&
              resolve("cublasGemmEx", &a.gemm_ex) &&
              resolve("cublasGetStatusString", &a.status_string);
  return loaded;  // the library stays loaded for the process
}

}  // namespace

const CublasApi* Cublas(std::string* why) {
  static const Loaded loaded = Load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

void CheckCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi* api = Cublas(nullptr);
  std::fprintf(stderr, "cuBLAS: %s: %s\n", what,
               api != nullptr ? api->status_string(status) : "(status string unavailable)");
  std::abort();
}

}  // namespace ripplekv::kernels::cuda
