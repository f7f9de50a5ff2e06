#include "kernels/comm/nccl_api.h"

#include <dlfcn.h>

namespace ripplekv::kernels::nccl {

namespace {

struct Loaded {
  NcclApi api{};
  bool ok = false;
  std::string why;
};

template <class Fn>
bool Resolve(void* library, const char* symbol, Fn* fn, std::string* why) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*fn == nullptr)
    *why = std::string("NCCL has no symbol ") + symbol + " (NCCL 2.14 or newer needed)";
  return *fn != nullptr;
}

Loaded Load() {
  Loaded loaded;
  void* library = nullptr;
  for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
  }
  if (library == nullptr) {
    const char* error = dlerror();
    loaded.why = std::string("cannot load NCCL: ") + (error != nullptr ? error : "not found");
    return loaded;
  }
  NcclApi& a = loaded.api;
  loaded.ok = Resolve(library, "ncclGetVersion", &a.get_version, &loaded.why) &&
              Resolve(library, "ncclGetErrorString", &a.get_error_string, &loaded.why) &&
              Resolve(library, "ncclGetLastError", &a.get_last_error, &loaded.why) &&
              Resolve(library, "ncclGetUniqueId", &a.get_unique_id, &loaded.why) &&
              Resolve(library, "ncclCommInitRankConfig", &a.comm_init_rank_config, &loaded.why) &&
              Resolve(library, "ncclCommGetAsyncError", &a.comm_get_async_error, &loaded.why) &&
              Resolve(library, "ncclCommFinalize", &a.comm_finalize, &loaded.why) &&
              Resolve(library, "ncclCommDestroy", &a.comm_destroy, &loaded.why) &&
              Resolve(library, "ncclCommAbort", &a.comm_abort, &loaded.why) &&
              Resolve(library, "ncclAllReduce", &a.all_reduce, &loaded.why) &&
              Resolve(library, "ncclAllGather", &a.all_gather, &loaded.why);
  return loaded;  // the library stays loaded for the process
}

}  // namespace

const NcclApi* Nccl(std::string* why) {
  static const Loaded loaded = Load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

std::string NcclErrorText(const NcclApi& api, ncclResult_t result, ncclComm_t comm) {
  std::string text = api.get_error_string(result);
  const char* last = api.get_last_error(comm);
  if (last != nullptr && last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

}  // namespace ripplekv::kernels::nccl
