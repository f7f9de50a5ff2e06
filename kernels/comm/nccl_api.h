#pragma once
// NCCL, loaded with dlopen on first use rather than linked: mapping and relocating libnccl costs
// every process hundreds of MiB of resident memory, and most RippleKV processes (scheduler, CPU
// workers, tools) never form an NCCL group. nccl.h is used for its types and enums only. Internal
// to kernels/comm/ (and its tests).

#include <nccl.h>

#include <string>

namespace ripplekv::kernels::nccl {

// The NCCL entry points the communicator calls, with NCCL's own signatures. Every one exists
// since NCCL 2.14 (non-blocking communicators, ncclCommFinalize).
struct NcclApi {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclGetLastError) get_last_error;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclCommFinalize) comm_finalize;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclAllGather) all_gather;
};

// The loaded library (loaded once per process, thread-safe; it stays loaded), or null with the
// loader's reason in *why (no libnccl on the library path, or a symbol missing). Loading needs no
// GPU or driver.
const NcclApi* Nccl(std::string* why);

// NCCL's words for `result`, followed by its last error message (of `comm` where given) when it
// has one, for Status messages.
std::string NcclErrorText(const NcclApi& api, ncclResult_t result, ncclComm_t comm = nullptr);

}  // namespace ripplekv::kernels::nccl
