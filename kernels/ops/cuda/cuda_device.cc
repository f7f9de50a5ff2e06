// CUDA devices and their allocators, through the CUDA runtime. Errors inside an allocator (which
// has no Status channel) are recorded as the process's device fault (cuda_device.h), which the
// next op reports as its Status; out of device memory throws std::bad_alloc.

#include "kernels/ops/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/ops/cuda/cublas_api.h"

namespace ripplekv::kernels::cuda {

namespace {

struct FaultRecord {
  std::mutex mu;
  std::string first;             // "" until the first fault
  std::atomic<bool> any{false};  // first is set: read without the lock after every launch
};

FaultRecord& Faults() {
  static auto* record = new FaultRecord();  // never destroyed: allocators report into it
  return *record;
}

void Record(const std::string& fault) {
  FaultRecord& r = Faults();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.first.empty()) return;
  r.first = fault;
  r.any.store(true, std::memory_order_release);
  std::fprintf(stderr, "CUDA device fault: %s (the device is unusable for this process)\n",
               fault.c_str());
}

bool Faulted() { return Faults().any.load(std::memory_order_acquire); }

}  // namespace

bool CheckCuda(int error, const char* what) {
  if (error == cudaSuccess) return true;
  Record(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(error)));
  return false;
}

bool CheckCublasStatus(int status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  const CublasApi* api = Cublas(nullptr);
  Record(std::string(what) + ": " +
         (api != nullptr ? api->status_string(static_cast<cublasStatus_t>(status))
                         : "cuBLAS error " + std::to_string(status)));
  return false;
}

std::string Fault() {
  FaultRecord& r = Faults();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.first;
}

bool IsOutOfMemory(int code) { return code == cudaErrorMemoryAllocation; }

bool SyncEveryLaunch() {
  static const bool sync = [] {
    const char* value = std::getenv("RIPPLEKV_CUDA_SYNC");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return sync;
}

int MallocAsync(void** block, size_t bytes, void* stream, const char* what) {
  const cudaError_t e =
      cudaMallocAsync(block, bytes == 0 ? 1 : bytes, static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess) return 0;
  cudaGetLastError();  // an allocation's failure is not sticky
  if (e != cudaErrorMemoryAllocation) CheckCuda(e, what);
  return static_cast<int>(e);
}

int LaunchResult(const OpContext& ctx, const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && SyncEveryLaunch()) {
    e = cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream));
  }
  if (!CheckCuda(e, what)) return static_cast<int>(e);
  return Faulted() ? static_cast<int>(cudaErrorUnknown) : 0;
}

namespace {

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int ordinal) : ordinal_(ordinal) {}
  Device device() const override { return Device::kCuda; }
  void* Allocate(size_t bytes) override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state of a failed allocation
      if (e != cudaErrorMemoryAllocation) CheckCuda(e, "cudaMalloc");
      throw std::bad_alloc();
    }
    CheckCuda(cudaMemset(p, 0, bytes), "cudaMemset");  // the Allocator contract: zero-filled
    return p;
  }
  void Free(void* block) noexcept override {
    if (block != nullptr) cudaFree(block);
  }
  void CopyFromHost(void* dst, const void* host_src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    CheckCuda(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy to the device");
  }
  void CopyToHost(void* host_dst, const void* src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    if (!CheckCuda(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host")) {
      std::memset(host_dst, 0xFF, bytes);
    }
  }
  void Copy(void* dst, const void* src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    CheckCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device");
  }

 private:
  int ordinal_;
};

class StreamAllocator final : public Allocator {
 public:
  StreamAllocator(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}
  Device device() const override { return Device::kCuda; }
  void* Allocate(size_t bytes) override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* p = nullptr;
    if (const cudaError_t e = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, stream_);
        e != cudaSuccess) {
      cudaGetLastError();
      if (e != cudaErrorMemoryAllocation) CheckCuda(e, "cudaMallocAsync");
      throw std::bad_alloc();
    }
    return p;  // not zero-filled: op temporaries (cuda_device.h)
  }
  void Free(void* block) noexcept override {
    if (block != nullptr) cudaFreeAsync(block, stream_);
  }
  // Pageable host memory: cudaMemcpyAsync returns once the bytes are staged, so the caller may
  // reuse host_src at once.
  void CopyFromHost(void* dst, const void* host_src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    CheckCuda(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
              "copy to the device");
  }
  void CopyToHost(void* host_dst, const void* src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    if (!CheckCuda(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
                   "copy to the host") ||
        !CheckCuda(cudaStreamSynchronize(stream_), "copy to the host")) {
      std::memset(host_dst, 0xFF, bytes);
    }
  }
  void Copy(void* dst, const void* src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
              "copy on the device");
  }

 private:
  int ordinal_;
  cudaStream_t stream_;
};

struct Devices {
  int count = 0;
  std::string why;
  std::vector<std::unique_ptr<CudaAllocator>> allocators;
};

Devices& Discovered() {
  static Devices* devices = [] {
    auto* d = new Devices();  // never destroyed: allocators outlive every static tensor
    const cudaError_t err = cudaGetDeviceCount(&d->count);
    if (err != cudaSuccess) {
      d->count = 0;
      d->why = std::string("the CUDA runtime finds no usable driver or GPU (") +
               cudaGetErrorString(err) +
               "): no NVIDIA driver, no GPU, or a driver older than "
               "this build's CUDA runtime";
      cudaGetLastError();
    } else if (d->count == 0) {
      d->why = "no CUDA device is visible";
    }
    for (int i = 0; i < d->count; ++i) d->allocators.push_back(std::make_unique<CudaAllocator>(i));
    return d;
  }();
  return *devices;
}

}  // namespace

int DeviceCount(std::string* why) {
  const Devices& d = Discovered();
  if (why != nullptr) *why = d.why;
  return d.count;
}

Allocator* DeviceAllocatorFor(int ordinal) { return Discovered().allocators.at(ordinal).get(); }

bool MemoryInfo(int ordinal, size_t* free_bytes, size_t* total_bytes, std::string* why) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != ordinal) cudaSetDevice(ordinal);
  const cudaError_t err = cudaMemGetInfo(free_bytes, total_bytes);
  if (current >= 0 && current != ordinal) cudaSetDevice(current);
  if (err != cudaSuccess) {
    *why = std::string("cudaMemGetInfo: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return false;
  }
  return true;
}

void* Activate(const OpContext& ctx) {
  int current = -1;
  CheckCuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != ctx.ordinal) CheckCuda(cudaSetDevice(ctx.ordinal), "cudaSetDevice");
  return ctx.stream;
}

bool OpenSession(int ordinal, size_t workspace_bytes, OpContext* ctx, std::string* why) {
  const CublasApi* blas = Cublas(why);
  if (blas == nullptr) return false;
  auto fail = [&](const char* what, cudaError_t error) {
    *why = std::string(what) + ": " + cudaGetErrorString(error);
    cudaGetLastError();
    CloseSession(ctx);
    return false;
  };
  ctx->device = Device::kCuda;
  ctx->ordinal = ordinal;
  if (cudaError_t e = cudaSetDevice(ordinal); e != cudaSuccess) return fail("cudaSetDevice", e);
  // A blocking stream: the allocators' synchronous copies (on the legacy default stream) wait
  // for the work queued here, so results copied to the host are always complete.
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreate(&stream); e != cudaSuccess) {
    return fail("cudaStreamCreate", e);
  }
  ctx->stream = stream;
  // Freed stream-ordered blocks stay in the pool for reuse instead of going back to the driver
  // at every synchronization.
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
    uint64_t keep_all = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
  }
  cudaGetLastError();
  if (workspace_bytes > 0) {
    if (cudaError_t e = cudaMalloc(&ctx->workspace.data, workspace_bytes); e != cudaSuccess) {
      return fail("the session workspace", e);
    }
    ctx->workspace.bytes = workspace_bytes;
  }
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t s = blas->create(&handle); s != CUBLAS_STATUS_SUCCESS) {
    *why = std::string("cublasCreate: ") + blas->status_string(s);
    CloseSession(ctx);
    return false;
  }
  ctx->blas = handle;
  auto blas_fail = [&](const char* what, cublasStatus_t status) {
    *why = std::string(what) + ": " + blas->status_string(status);
    CloseSession(ctx);
    return false;
  };
  if (cublasStatus_t s = blas->set_stream(handle, stream); s != CUBLAS_STATUS_SUCCESS) {
    return blas_fail("cublasSetStream", s);
  }
  if (ctx->workspace.bytes > 0) {
    if (cublasStatus_t s = blas->set_workspace(handle, ctx->workspace.data, ctx->workspace.bytes);
        s != CUBLAS_STATUS_SUCCESS) {
      return blas_fail("cublasSetWorkspace", s);
    }
  }
  // The default math mode never rounds fp32 inputs to TF32; each GEMM names its compute type.
  if (cublasStatus_t s = blas->set_math_mode(handle, CUBLAS_DEFAULT_MATH);
      s != CUBLAS_STATUS_SUCCESS) {
    return blas_fail("cublasSetMathMode", s);
  }
  return true;
}

Allocator* NewStreamAllocator(const OpContext& ctx) {
  return new StreamAllocator(ctx.ordinal, static_cast<cudaStream_t>(ctx.stream));
}

void CloseSession(OpContext* ctx) {
  if (ctx->stream != nullptr) {
    cudaSetDevice(ctx->ordinal);
    cudaStreamSynchronize(static_cast<cudaStream_t>(ctx->stream));
  }
  if (ctx->blas != nullptr) {
    if (const CublasApi* blas = Cublas(nullptr); blas != nullptr) {
      blas->destroy(static_cast<cublasHandle_t>(ctx->blas));
    }
  }
  if (ctx->workspace.data != nullptr) cudaFree(ctx->workspace.data);
  if (ctx->stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(ctx->stream));
  ctx->blas = nullptr;
  ctx->stream = nullptr;
  ctx->workspace = {};
}

bool Synchronize(const OpContext& ctx, std::string* why) {
  Activate(ctx);
  if (CheckCuda(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)),
                "synchronizing the stream") &&
      !Faulted()) {
    return true;
  }
  *why = Fault();
  return false;
}

}  // namespace ripplekv::kernels::cuda
