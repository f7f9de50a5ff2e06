#pragma once
// CUDA C++ as plain C++ for the host emulation (tests/cuda_host): the runtime API
// (cuda_runtime_api.h, with cuda_runtime.h's typed overloads), the execution-space keywords, the
// built-in variables and the device intrinsics the backend's kernels use, each mapped onto the
// emulator (tests/cuda_host/emulator.h) or onto the host's own arithmetic. Launches
// (`<<< >>>`) and __shared__ declarations are rewritten before compilation (rewrite_cuda.cc).
// __CUDACC__ and __CUDA_ARCH__ stay undefined: code that asks compiles its host path.

#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tests/cuda_host/emulator.h"

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define __launch_bounds__(...)

// --- Typed runtime overloads (cuda_runtime.h's templates). ---

template <class T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
template <class T>
cudaError_t cudaMallocAsync(T** ptr, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(ptr), bytes, stream);
}
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}

// --- Synchronization and warp operations. ---

inline void __syncthreads() { ripplekv::cuda_host::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ripplekv::cuda_host::SyncWarp(mask); }

namespace ripplekv::cuda_host {
template <class T>
T Shuffle(unsigned mask, T value, ShuffleMode mode, int operand, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move 8 bytes at most");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = ShuffleBits(mask, bits, mode, operand, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace ripplekv::cuda_host

template <class T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = warpSize) {
  return ripplekv::cuda_host::Shuffle(mask, value, ripplekv::cuda_host::ShuffleMode::kIndex,
                                      src_lane, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  return ripplekv::cuda_host::Shuffle(mask, value, ripplekv::cuda_host::ShuffleMode::kUp,
                                      static_cast<int>(delta), width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  return ripplekv::cuda_host::Shuffle(mask, value, ripplekv::cuda_host::ShuffleMode::kDown,
                                      static_cast<int>(delta), width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  return ripplekv::cuda_host::Shuffle(mask, value, ripplekv::cuda_host::ShuffleMode::kXor,
                                      lane_mask, width);
}

// --- Loads and arithmetic: the host's IEEE operations. The emulated sources are compiled with
// -ffp-contract=off, so a product or sum rounds on its own as the _rn intrinsics promise. ---

template <class T>
T __ldg(const T* p) {
  return *p;
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }

inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned int>(i)); }

// CUDA's global min and max overloads (the device math library's), one per operand type.
#define RIPPLEKV_CUDA_HOST_MIN_MAX(T)              \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
RIPPLEKV_CUDA_HOST_MIN_MAX(int)
RIPPLEKV_CUDA_HOST_MIN_MAX(unsigned int)
RIPPLEKV_CUDA_HOST_MIN_MAX(long)
RIPPLEKV_CUDA_HOST_MIN_MAX(unsigned long)
RIPPLEKV_CUDA_HOST_MIN_MAX(long long)
RIPPLEKV_CUDA_HOST_MIN_MAX(unsigned long long)
#undef RIPPLEKV_CUDA_HOST_MIN_MAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
