// The CUDA runtime of the host emulation (tests/cuda_host/shim/cuda_runtime_api.h): one device,
// ordinal 0, whose memory is host memory. Allocations are filled with 0xFF bytes (NaN floats), as
// a real allocation holds whatever was there before: code that reads memory it never wrote sees
// poison. Copies and sets check that their device side lies inside one allocation. The stream
// pool keeps nothing (each cudaMallocAsync is a fresh allocation).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "tests/cuda_host/emulator.h"
#include "tests/cuda_host/runtime_state.h"

struct CUstream_st {
  unsigned int flags;
};
struct CUevent_st {
  unsigned int flags;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};
struct CUmemPoolHandle_st {};

namespace ripplekv::cuda_host {

namespace {

// What the emulated device reports as its memory (cudaMemGetInfo); allocations past it fail.
constexpr size_t kTotalBytes = size_t{16} << 30;
constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

struct Device {
  std::mutex mutex;
  std::map<uintptr_t, size_t> allocations;  // start -> bytes asked for (the range copies may use)
  size_t used = 0;
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  bool fault_pending = false;
  CUmemPoolHandle_st pool;
};

Device& TheDevice() {
  static Device* device = new Device();  // never destroyed: static tensors free at exit
  return *device;
}

thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t Check(bool ok, cudaError_t error) { return ok ? cudaSuccess : Fail(error); }

// The pending kernel fault, consumed by a synchronizing call.
cudaError_t TakeFault() {
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!d.fault_pending) return cudaSuccess;
  d.fault_pending = false;
  return Fail(cudaErrorLaunchFailure);
}

bool InAllocationLocked(const Device& d, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = d.allocations.upper_bound(at);
  if (it == d.allocations.begin()) return false;
  --it;
  return at + bytes <= it->first + it->second;
}

cudaError_t Allocate(void** ptr, size_t bytes) {
  if (ptr == nullptr) return Fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  Device& d = TheDevice();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.used + rounded > kTotalBytes) return Fail(cudaErrorMemoryAllocation);
    d.used += rounded;
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.used -= rounded;
    return Fail(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xFF, rounded);
  std::lock_guard<std::mutex> lock(d.mutex);
  d.allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t Release(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  Device& d = TheDevice();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == d.allocations.end()) return Fail(cudaErrorInvalidValue);
    d.used -= (it->second + kAlignment - 1) / kAlignment * kAlignment;
    d.allocations.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return Fail(cudaErrorInvalidMemcpyDirection);
  }
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !IsDeviceMemory(dst, bytes)) || (src_device && !IsDeviceMemory(src, bytes))) {
    return Fail(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t Set(void* ptr, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!IsDeviceMemory(ptr, bytes)) return Fail(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

bool IsEvent(cudaEvent_t event) {
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.events.count(event) > 0;
}

// Streams and events: made with new, known to the device until destroyed.
template <class Handle>
cudaError_t CreateHandle(Handle* out, unsigned int flags, std::set<Handle> Device::*known) {
  *out = new std::remove_pointer_t<Handle>{flags};
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  (d.*known).insert(*out);
  return cudaSuccess;
}

template <class Handle>
cudaError_t DestroyHandle(Handle handle, std::set<Handle> Device::*known) {
  Device& d = TheDevice();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (handle == nullptr || (d.*known).erase(handle) == 0) {
      return Fail(cudaErrorInvalidResourceHandle);
    }
  }
  delete handle;
  return cudaSuccess;
}

}  // namespace

cudaError_t Fail(cudaError_t error) {
  t_last_error = error;
  return error;
}

void ReportKernelFault(const std::string& what) {
  std::fprintf(stderr, "cuda_host: kernel fault: %s\n", what.c_str());
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.fault_pending = true;
}

bool IsLiveStream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.streams.count(stream) > 0;
}

bool IsDeviceMemory(const void* p, size_t bytes) {
  Device& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  return InAllocationLocked(d, p, bytes);
}

}  // namespace ripplekv::cuda_host

using ripplekv::cuda_host::Check;
using ripplekv::cuda_host::Fail;
using ripplekv::cuda_host::IsLiveStream;
using ripplekv::cuda_host::TheDevice;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return Check(device == 0, cudaErrorInvalidDevice); }

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return ripplekv::cuda_host::TakeFault(); }

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return Fail(cudaErrorInvalidValue);
  *version = RIPPLEKV_CUDA_HOST_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return Fail(cudaErrorInvalidValue);
  auto& d = TheDevice();
  std::lock_guard<std::mutex> lock(d.mutex);
  *total_bytes = ripplekv::cuda_host::kTotalBytes;
  *free_bytes = ripplekv::cuda_host::kTotalBytes - d.used;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = ripplekv::cuda_host::t_last_error;
  ripplekv::cuda_host::t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return ripplekv::cuda_host::t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorUnknown:
      return "cudaErrorUnknown";
  }
  return "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorUnknown:
      return "unknown error";
  }
  return "unrecognized error code";
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  return ripplekv::cuda_host::Allocate(ptr, bytes);
}

cudaError_t cudaFree(void* ptr) { return ripplekv::cuda_host::Release(ptr); }

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::Allocate(ptr, bytes);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::Release(ptr);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = ripplekv::cuda_host::TakeFault(); e != cudaSuccess) return e;
  return ripplekv::cuda_host::Copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::Copy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return ripplekv::cuda_host::Set(ptr, value, bytes);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::Set(ptr, value, bytes);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (pool == nullptr) return Fail(cudaErrorInvalidValue);
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  *pool = &TheDevice().pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const bool ok =
      pool == &TheDevice().pool && attr == cudaMemPoolAttrReleaseThreshold && value != nullptr;
  return Check(ok, cudaErrorInvalidValue);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr || flags > cudaStreamNonBlocking) return Fail(cudaErrorInvalidValue);
  return ripplekv::cuda_host::CreateHandle(stream, flags, &ripplekv::cuda_host::Device::streams);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return ripplekv::cuda_host::DestroyHandle(stream, &ripplekv::cuda_host::Device::streams);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::TakeFault();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  const bool ok = IsLiveStream(stream) && ripplekv::cuda_host::IsEvent(event);
  (void)flags;
  return Check(ok, cudaErrorInvalidResourceHandle);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (!IsLiveStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return Fail(cudaErrorInvalidValue);
  fn(user_data);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr || flags > (cudaEventBlockingSync | cudaEventDisableTiming)) {
    return Fail(cudaErrorInvalidValue);
  }
  return ripplekv::cuda_host::CreateHandle(event, flags, &ripplekv::cuda_host::Device::events);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return ripplekv::cuda_host::DestroyHandle(event, &ripplekv::cuda_host::Device::events);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!ripplekv::cuda_host::IsEvent(event) || !IsLiveStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle);
  }
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return Check(ripplekv::cuda_host::IsEvent(event), cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!ripplekv::cuda_host::IsEvent(event)) return Fail(cudaErrorInvalidResourceHandle);
  return ripplekv::cuda_host::TakeFault();
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return Fail(cudaErrorInvalidValue);
  if (!ripplekv::cuda_host::IsEvent(start) || !ripplekv::cuda_host::IsEvent(end) ||
      ((start->flags | end->flags) & cudaEventDisableTiming) != 0) {
    return Fail(cudaErrorInvalidResourceHandle);
  }
  if (!start->recorded || !end->recorded) return Fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (func == nullptr) return Fail(cudaErrorInvalidDeviceFunction);
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      return Check(ripplekv::cuda_host::SetMaxDynamicShared(func, value), cudaErrorInvalidValue);
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      return Check(value >= -1 && value <= 100, cudaErrorInvalidValue);
  }
  return Fail(cudaErrorInvalidValue);
}

}  // extern "C"
