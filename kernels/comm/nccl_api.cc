#include "kernels/comm/nccl_api.h"

#include "base/dynamic_library.h"

namespace ripplekv::kernels::nccl {

namespace {

struct Loaded {
  NcclApi api{};
  bool ok = false;
  std::string why;
};

Loaded Load() {
  Loaded loaded;
  void* library = OpenFirstLibrary({"libnccl.so.2", "libnccl.so"}, "NCCL", &loaded.why);
  if (library == nullptr) return loaded;
  NcclApi& a = loaded.api;
  auto resolve = [&](const char* symbol, auto* fn) {
    return ResolveSymbol(library, symbol, fn, "NCCL", &loaded.why, " (NCCL 2.14 or newer needed)");
  };
  loaded.ok = resolve("ncclGetVersion", &a.get_version) &&
              resolve("ncclGetErrorString", &a.get_error_string) &&
              resolve("ncclGetLastError", &a.get_last_error) &&
              resolve("ncclGetUniqueId", &a.get_unique_id) &&
              resolve("ncclCommInitRankConfig", &a.comm_init_rank_config) &&
              resolve("ncclCommGetAsyncError", &a.comm_get_async_error) &&
              resolve("ncclCommFinalize", &a.comm_finalize) &&
              resolve("ncclCommDestroy", &a.comm_destroy) &&
              resolve("ncclCommAbort", &a.comm_abort) &&
              resolve("ncclAllReduce", &a.all_reduce) &&
              resolve("ncclAllGather", &a.all_gather);
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
