#pragma once
// The CUDA backend's devices, sessions and allocators, for devices.cc and the backend's launchers
// (internal: include only from kernels/ops/). Each op family's launchers are declared in
// cuda/NAME.h beside its cuda/NAME.cu: they take the op's context and device pointers the front
// end checked, make ctx.ordinal the calling thread's device (Activate), queue their kernels on
// ctx.stream and return (callers copy results back with the allocator, whose copies wait for the
// stream: sessions create blocking streams, devices.h).

#include <cstddef>
#include <string>

#include "kernels/tensor/allocator.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// Aborts with the runtime's message when `error` (a cudaError_t) is not cudaSuccess: for the
// backend's internal calls that have no Status channel (allocators, synchronous copies).
void CheckCuda(int error, const char* what);

// Visible CUDA devices; 0 and the runtime's reason in *why when there are none.
int DeviceCount(std::string* why);
// The allocator of device `ordinal` (< DeviceCount), created on first use, alive for the process.
Allocator* DeviceAllocatorFor(int ordinal);

// A session's device resources (devices.h DeviceSession): a blocking stream on device `ordinal`,
// a cuBLAS handle bound to it (cuBLAS is loaded on first use, so processes that never open a
// device do not map it) and a workspace of `workspace_bytes`. Fills *ctx's device fields; returns
// false with the reason in *why when any of them cannot be had (nothing left allocated).
bool OpenSession(int ordinal, size_t workspace_bytes, OpContext* ctx, std::string* why);
// Waits for the stream, then frees what OpenSession made (ctx's device fields are cleared).
void CloseSession(OpContext* ctx);
// A stream-ordered allocator on ctx's device and stream (cudaMallocAsync / cudaFreeAsync from the
// device's memory pool, which keeps freed memory for reuse): allocating and freeing a temporary
// never waits for the device, and a block freed while kernels still read it stays valid until
// they ran. Copies to the host wait for the stream. Must be destroyed before the session closes.
Allocator* NewStreamAllocator(const OpContext& ctx);
// Free and total memory of device `ordinal` (cudaMemGetInfo); false with the reason in *why.
bool MemoryInfo(int ordinal, size_t* free_bytes, size_t* total_bytes, std::string* why);
// Waits for ctx.stream; false with the first asynchronous error's text in *why.
bool Synchronize(const OpContext& ctx, std::string* why);
// Makes ctx.ordinal the calling thread's device and returns ctx.stream (a cudaStream_t).
void* Activate(const OpContext& ctx);

}  // namespace ripplekv::kernels::cuda
