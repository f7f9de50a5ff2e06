#pragma once
// Where a Tensor's bytes live. The host allocator is built in; a device backend provides an
// allocator for its device (memory on that device, copies to and from the host), so Tensor and
// its callers need no change when a backend is added.

#include <cstddef>

#include "kernels/tensor/device.h"

namespace ripplekv::kernels {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // A zero-filled block of `bytes` (>= 1), 64-byte aligned. Throws std::bad_alloc when the memory
  // cannot be had.
  virtual void* Allocate(size_t bytes) = 0;
  // Releases a block from Allocate (nullptr is a no-op).
  virtual void Free(void* block) noexcept = 0;
  // Synchronous copies between this allocator's memory and host memory.
  virtual void CopyFromHost(void* dst, const void* host_src, size_t bytes) const = 0;
  virtual void CopyToHost(void* host_dst, const void* src, size_t bytes) const = 0;
  // A copy within this allocator's memory.
  virtual void Copy(void* dst, const void* src, size_t bytes) const = 0;
};

// Host memory (aligned_alloc, zero-filled). Thread-safe; lives for the whole process.
Allocator& HostAllocator();

}  // namespace ripplekv::kernels
