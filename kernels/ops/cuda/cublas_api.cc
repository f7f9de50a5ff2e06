#include "kernels/ops/cuda/cublas_api.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace ripplekv::kernels::cuda {

namespace {

struct Loaded {
  CublasApi api{};
  bool ok = false;
  std::string why;
};

template <class Fn>
bool Resolve(void* library, const char* symbol, Fn* fn, std::string* why) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*fn == nullptr) *why = std::string("cuBLAS has no symbol ") + symbol;
  return *fn != nullptr;
}

Loaded Load() {
  Loaded loaded;
  void* library = nullptr;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
  }
  if (library == nullptr) {
    const char* error = dlerror();
    loaded.why = std::string("cannot load cuBLAS: ") + (error != nullptr ? error : "not found");
    return loaded;
  }
  CublasApi& a = loaded.api;
  loaded.ok = Resolve(library, "cublasCreate_v2", &a.create, &loaded.why) &&
              Resolve(library, "cublasDestroy_v2", &a.destroy, &loaded.why) &&
              Resolve(library, "cublasSetStream_v2", &a.set_stream, &loaded.why) &&
              Resolve(library, "cublasSetWorkspace_v2", &a.set_workspace, &loaded.why) &&
              Resolve(library, "cublasSetMathMode", &a.set_math_mode, &loaded.why) &&
              Resolve(library, "cublasGemmEx", &a.gemm_ex, &loaded.why) &&
              Resolve(library, "cublasGetStatusString", &a.status_string, &loaded.why);
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
