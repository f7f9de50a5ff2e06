// CUDA devices and their allocators, through the CUDA runtime. Errors inside an allocator (which
// has no Status channel) are fatal with the runtime's message, as an out-of-memory host
// allocation is.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/ops/cuda/cuda_backend.h"

namespace ripplekv::kernels::cuda {

void CheckCuda(int error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "CUDA: %s: %s\n", what, cudaGetErrorString(static_cast<cudaError_t>(error)));
  std::abort();
}

namespace {

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int ordinal) : ordinal_(ordinal) {}
  Device device() const override { return Device::kCuda; }
  void* Allocate(size_t bytes) override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* p = nullptr;
    if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state of a failed allocation
      throw std::bad_alloc();
    }
    CheckCuda(cudaMemset(p, 0, bytes), "cudaMemset");
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
    CheckCuda(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
  }
  void Copy(void* dst, const void* src, size_t bytes) const override {
    CheckCuda(cudaSetDevice(ordinal_), "cudaSetDevice");
    CheckCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on the device");
  }

 private:
  int ordinal_;
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
      d->why = cudaGetErrorString(err);
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

}  // namespace ripplekv::kernels::cuda
