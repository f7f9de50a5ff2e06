#pragma once
// How the host emulation of CUDA (tests/cuda_host) runs a kernel on the CPU, and the device-side
// operations the shim headers (tests/cuda_host/shim/) map CUDA's built-ins onto.
//
// Execution model. A launch runs its blocks one after another on the launching OS thread, and the
// threads of a block as fibers (fiber.h), one per CUDA thread, cooperatively: a thread runs until
// it waits at __syncthreads, at a warp operation (__syncwarp, __shfl*_sync) or ends, and barriers
// are real (a thread past __syncthreads sees every write made before it by the block). Threads
// that ended count as arrived, as on the hardware. Each scheduling pass visits the waiting threads
// in index order, alternating forward and backward from pass to pass and from block to block, so
// that a read another thread has not yet written (a missing barrier) sees poison in one order or
// the other. Warp shuffles exchange values among the lanes of a warp (32 consecutive threads);
// reading a lane that did not take part (ended, or outside the mask) yields all one bits (NaN).
//
// Memory. Each block gets fresh shared memory filled with 0xFF bytes (NaN floats and doubles, -1
// integers): the dynamic part at the start, each static __shared__ variable after it. An async
// copy (__pipeline_memcpy_async) fills its destination with 0xFF at once and copies when its
// thread waits for its batch (__pipeline_wait_prior), so data read before the wait, or by another
// thread without a barrier after the wait, is poison. Device memory is host memory
// (runtime.cc), also poisoned when allocated.
//
// Faults. A deadlock (no thread can go on), a bad async copy, too much shared memory or a bad
// shuffle width ends the launch: it is reported on stderr with the launch's source line, block
// and thread, and the next synchronizing runtime call returns cudaErrorLaunchFailure.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ripplekv::cuda_host {

template <class... Args>
struct BoundLaunch;

// `kernel<<<grid, block, shared_bytes, stream>>>(args)` as the rewrite spells it (rewrite_cuda.cc):
// `kernel | LaunchConfig(grid, block, shared_bytes, stream)(args)`.
struct LaunchConfig {
  LaunchConfig(dim3 grid_dims, dim3 block_dims, size_t dynamic_shared = 0,
               cudaStream_t launch_stream = nullptr,
               std::source_location location = std::source_location::current())
      : grid(grid_dims),
        block(block_dims),
        shared_bytes(dynamic_shared),
        stream(launch_stream),
        where(location) {}
  // The launch with its arguments, as given (converted to the kernel's parameters at launch).
  template <class... Args>
  BoundLaunch<std::decay_t<Args>...> operator()(Args&&... args) const {
    return {*this, std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)};
  }

  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
  std::source_location where;
};

template <class... Args>
struct BoundLaunch {
  LaunchConfig config;
  std::tuple<Args...> args;
};

// Runs body(closure) once on every thread of every block of `config`. An invalid configuration
// (no threads, more than 1024 per block, a grid past CUDA's limits, more dynamic shared memory
// than the kernel may have, a destroyed stream) runs nothing and returns its error, which is also
// the calling thread's last error (cudaGetLastError); cudaSuccess otherwise, even when the kernel
// faulted (that surfaces at the next synchronization, as on a device). Not from inside a kernel.
cudaError_t Launch(const void* kernel, const LaunchConfig& config, void (*body)(void*),
                   void* closure);

// Launches `kernel` on `params`, each thread calling it on its own copy of them.
template <class... Params>
void LaunchKernel(void (*kernel)(Params...), const LaunchConfig& config,
                  std::tuple<std::remove_cvref_t<Params>...> params) {
  struct Closure {
    void (*kernel)(Params...);
    std::tuple<std::remove_cvref_t<Params>...>* params;
  };
  Closure closure{kernel, &params};
  Launch(
      reinterpret_cast<const void*>(kernel), config,
      [](void* c) {
        auto* bound = static_cast<Closure*>(c);
        std::apply(bound->kernel, *bound->params);
      },
      &closure);
}

// The launch itself. CUDA converts the arguments to the kernel's parameter types when it launches.
template <class... Params, class... Args>
void operator|(void (*kernel)(Params...), BoundLaunch<Args...>&& launch) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a launch with the wrong argument count");
  LaunchKernel(
      kernel, launch.config,
      std::make_from_tuple<std::tuple<std::remove_cvref_t<Params>...>>(std::move(launch.args)));
}

// A kernel template whose remaining template arguments the launch deduces from its arguments
// (`Kernel<Format><<<...>>>(blocks, n, out)`): the overload set resolves against the argument
// types, so this form needs arguments of exactly the parameters' types.
template <class... Args>
void operator|(void (*kernel)(Args...), BoundLaunch<Args...>&& launch) {
  LaunchKernel(kernel, launch.config, std::move(launch.args));
}

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): the dynamic
// shared memory `kernel` may launch with (48 KiB until set). False when `bytes` is negative or
// past what the emulated device allows a block (kMaxSharedBytes).
bool SetMaxDynamicShared(const void* kernel, int bytes);
// The shared memory one block may have in all: 99 KiB, what an sm_86/sm_89 part allows (the
// smallest of the GPUs the backend targets), so a kernel that fits here fits there.
inline constexpr size_t kMaxSharedBytes = 99 * 1024;

// --- Device side: only from inside a kernel (a fault otherwise). ---

// __syncthreads.
void SyncThreads();
// __syncwarp(mask).
void SyncWarp(unsigned mask);
enum class ShuffleMode { kIndex, kUp, kDown, kXor };
// __shfl*_sync on up to 8 bytes (the value's bits): the value of the source lane that `mode`
// and `operand` pick within the lane's segment of `width` lanes (a power of two <= 32).
uint64_t ShuffleBits(unsigned mask, uint64_t bits, ShuffleMode mode, int operand, int width);

// Static __shared__ variable number `site` of its source file: `bytes` of the running block's
// shared memory, poisoned on first use in the block, the same for every thread of the block.
void* SharedStatic(int site, size_t bytes, size_t align);
// The start of the running block's dynamic shared memory (16-byte aligned).
void* SharedDynamic();

template <class T>
T& StaticShared(int site) {
  return *static_cast<T*>(SharedStatic(site, sizeof(T), alignof(T)));
}
template <class T>
T* DynamicShared() {
  return static_cast<T*>(SharedDynamic());
}

// __pipeline_memcpy_async, __pipeline_commit and __pipeline_wait_prior of the calling thread.
void AsyncCopy(void* dst_shared, const void* src_global, size_t size_and_align, size_t zfill);
void AsyncCommit();
void AsyncWaitPrior(size_t prior);

}  // namespace ripplekv::cuda_host

// CUDA's built-in variables: the running thread's indices (set by the emulator whenever it
// switches threads) and the launch's shape.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
inline constexpr int warpSize = 32;
