#include "kernels/tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace ripplekv::kernels {

namespace {

constexpr size_t kAlignment = 64;

class Host final : public Allocator {
 public:
  Device device() const override { return Device::kCpu; }
  void* Allocate(size_t bytes) override {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return p;
  }
  void Free(void* block) noexcept override { std::free(block); }
  void CopyFromHost(void* dst, const void* host_src, size_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, host_src, bytes);
  }
  void CopyToHost(void* host_dst, const void* src, size_t bytes) const override {
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
  }
  void Copy(void* dst, const void* src, size_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
};

}  // namespace

Allocator& HostAllocator() {
  static Host host;
  return host;
}

}  // namespace ripplekv::kernels
