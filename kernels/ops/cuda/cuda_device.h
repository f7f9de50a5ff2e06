#pragma once
// The CUDA backend's devices, sessions and allocators, for devices.cc and the backend's launchers
// (internal: include only from kernels/ops/). Each op family's launchers are declared in
// cuda/NAME.h beside its cuda/NAME.cu: they take the op's context and device pointers the front
// end checked, make ctx.ordinal the calling thread's device (Activate), queue their kernels on
// ctx.stream and return (callers copy results back with the allocator, whose copies wait for the
// stream: sessions create blocking streams, devices.h).

#include <cstddef>
#include <string>

#include "kernels/ops/op_context.h"
#include "kernels/tensor/allocator.h"

namespace ripplekv::kernels::cuda {

// Device faults. Any CUDA error the backend meets after its sessions opened (a kernel that could
// not launch or faulted, a copy, a synchronization, a cuBLAS call) is recorded as the process's
// device fault: the first one is kept, logged once to stderr, and every later launch reports it
// again, since a faulted CUDA context stays unusable for the rest of the process. An allocation
// that finds the device out of memory is not a fault (the allocator throws std::bad_alloc).

// Records a fault when `error` (a cudaError_t) is not cudaSuccess: "<what>: <the runtime's
// message>". True when `error` is cudaSuccess.
bool CheckCuda(int error, const char* what);
// Records a fault when `status` (a cublasStatus_t) is not CUBLAS_STATUS_SUCCESS; as CheckCuda.
bool CheckCublasStatus(int status, const char* what);
// The first fault recorded in this process, or "" when there was none. Thread-safe.
std::string Fault();

// What a launcher returns, after each kernel it queues on ctx.stream: 0 when the launch was
// accepted and no fault is recorded, else nonzero with the fault recorded (Fault()). Launch errors
// (cudaGetLastError) are checked after every launch; with RIPPLEKV_CUDA_SYNC=1 in the environment
// the stream is also synchronized after every launch, so an asynchronous fault is reported by the
// op whose kernel caused it (for bring-up and debugging: it costs a round trip per kernel).
int LaunchResult(const OpContext& ctx, const char* what);
// Whether a launcher's nonzero code means the device was out of memory (not a fault).
bool IsOutOfMemory(int code);
// Whether RIPPLEKV_CUDA_SYNC=1 (read once per process).
bool SyncEveryLaunch();
// A launcher's stream-ordered temporary (cudaMallocAsync on `stream`, a cudaStream_t): 0 with
// *block set; cudaErrorMemoryAllocation when the device is out of memory (not a fault: the front
// end answers ResourceExhausted); any other error is recorded as a fault and returned.
int MallocAsync(void** block, size_t bytes, void* stream, const char* what);

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
// they ran. Its blocks are NOT zero-filled (op temporaries are written before they are read; the
// host-emulation tests poison fresh blocks to hold every op to that). Copies to the host wait
// for the stream; a copy that fails records the fault and fills the host destination with 0xFF
// bytes (NaN floats), never plausible values. Must be destroyed before the session closes.
Allocator* NewStreamAllocator(const OpContext& ctx);
// Free and total memory of device `ordinal` (cudaMemGetInfo); false with the reason in *why.
bool MemoryInfo(int ordinal, size_t* free_bytes, size_t* total_bytes, std::string* why);
// Waits for ctx.stream; false with the fault in *why (recorded: Fault()).
bool Synchronize(const OpContext& ctx, std::string* why);
// Makes ctx.ordinal the calling thread's device and returns ctx.stream (a cudaStream_t). A failure
// is recorded as a fault, which the launch that follows reports.
void* Activate(const OpContext& ctx);

}  // namespace ripplekv::kernels::cuda
