#pragma once
// What the emulated runtime (runtime.cc) and the kernel executor (emulator.cc) of tests/cuda_host
// share. Thread-safe.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace ripplekv::cuda_host {

// Records `error` as the calling thread's last error (cudaGetLastError) and returns it.
cudaError_t Fail(cudaError_t error);
// A kernel went wrong while it ran: prints `what` on stderr and makes the next synchronizing call
// return cudaErrorLaunchFailure (once).
void ReportKernelFault(const std::string& what);
// Whether `stream` is the legacy default stream (null) or a created, not yet destroyed stream.
bool IsLiveStream(cudaStream_t stream);
// Whether [p, p + bytes) lies inside one live device allocation.
bool IsDeviceMemory(const void* p, size_t bytes);

}  // namespace ripplekv::cuda_host
