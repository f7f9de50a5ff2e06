#pragma once
// Owning `Tensor` (any dtype, any device through its allocator) and non-owning fp32 `TensorView`s.
// Row-major; the last dimension is contiguous. Memory is 64-byte aligned so SIMD loads and BLAS
// calls never straddle cache lines.
// Not thread-safe for concurrent mutation; concurrent reads are fine.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor/allocator.h"
#include "base/check.h"
#include "kernels/tensor/device.h"
#include "kernels/tensor/dtype.h"

namespace ripplekv::kernels {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);

// A view over memory owned elsewhere. Copying a view never copies data.
struct TensorView {
  float* data = nullptr;
  Shape shape;
  Device device = Device::kCpu;

  int64_t numel() const { return NumElements(shape); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int rank() const { return static_cast<int>(shape.size()); }
};

struct ConstTensorView {
  const float* data = nullptr;
  Shape shape;
  Device device = Device::kCpu;

  ConstTensorView() = default;
  ConstTensorView(const float* d, Shape s, Device dev = Device::kCpu)
      : data(d), shape(std::move(s)), device(dev) {}
  ConstTensorView(const TensorView& v)  // NOLINT(google-explicit-constructor): views narrow freely
      : data(v.data), shape(v.shape), device(v.device) {}
  int64_t numel() const { return NumElements(shape); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int rank() const { return static_cast<int>(shape.size()); }
};

// Read-only int32 values (token positions, row indices, token ids) on a device. Host spans and
// vectors convert implicitly, so host callers pass those; an int32 tensor's int32_view() names the
// tensor's device. Only a CPU view may be read on the host (ops check the device first).
struct Int32View {
  const int32_t* ptr = nullptr;
  int64_t count = 0;
  Device device = Device::kCpu;

  Int32View() = default;
  Int32View(const int32_t* p, int64_t n, Device dev) : ptr(p), count(n), device(dev) {}
  Int32View(std::span<const int32_t> host)  // NOLINT(google-explicit-constructor)
      : ptr(host.data()), count(static_cast<int64_t>(host.size())) {}
  Int32View(const std::vector<int32_t>& host)  // NOLINT(google-explicit-constructor)
      : Int32View(std::span<const int32_t>(host)) {}
  template <size_t N>
  Int32View(const int32_t (&host)[N])  // NOLINT(google-explicit-constructor)
      : Int32View(std::span<const int32_t>(host)) {}

  const int32_t* data() const { return ptr; }
  size_t size() const { return static_cast<size_t>(count); }
  bool empty() const { return count == 0; }
  const int32_t& operator[](size_t i) const { return ptr[i]; }  // CPU views only
};

namespace internal {
// Returns a Tensor's block to the allocator it came from.
struct TensorRelease {
  Allocator* allocator = nullptr;
  void operator()(void* p) const {
    if (allocator != nullptr) allocator->Free(p);
  }
};
}  // namespace internal

// Owns a zero-initialized buffer of `shape` elements of `dtype`, on the device of its allocator
// (the host by default). Move-only.
//
// Access is checked: data() and span() are for fp32 host tensors, host_data<T>() for a host tensor
// of T's dtype, view() for an fp32 tensor on any device (ops check the device); each CHECK-fails
// otherwise (a programmer error). Kernels of a
// device backend reach device memory through raw(). CopyTo and ToHost move tensors between
// allocators.
class Tensor {
 public:
  Tensor() = default;
  // fp32 on the host.
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::span<const float> values);
  // int32 on the host, holding `values` (as many as the shape has elements).
  Tensor(Shape shape, std::span<const int32_t> values);
  // Any dtype, on `allocator`'s device (which must outlive the tensor).
  Tensor(Shape shape, DType dtype, Allocator& allocator = HostAllocator());

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A copy on the same allocator.
  Tensor Clone() const;
  // A copy on `allocator` (any pair of devices: through the host when neither is the host).
  Tensor CopyTo(Allocator& allocator) const;
  Tensor ToHost() const { return CopyTo(HostAllocator()); }

  const Shape& shape() const { return shape_; }
  // 0 for a default-constructed (empty) tensor.
  int64_t numel() const { return data_ ? NumElements(shape_) : 0; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  bool empty() const { return data_ == nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }

  // fp32 host tensors (nullptr when empty).
  float* data() { return host_data<float>(); }
  const float* data() const { return host_data<float>(); }
  std::span<float> span() { return {data(), static_cast<size_t>(numel())}; }
  std::span<const float> span() const { return {data(), static_cast<size_t>(numel())}; }
  // An fp32 tensor on any device, as the ops take it (the view carries the device; only a CPU
  // view's data may be dereferenced on the host).
  TensorView view() {
    CheckType(DType::kF32);
    return {static_cast<float*>(data_.get()), shape_, device_};
  }
  ConstTensorView view() const {
    CheckType(DType::kF32);
    return {static_cast<const float*>(data_.get()), shape_, device_};
  }

  // An int32 tensor on any device, as the ops take it.
  Int32View int32_view() const {
    CheckType(DType::kI32);
    return {static_cast<const int32_t*>(data_.get()), numel(), device_};
  }

  // The int32 elements on any device, for ops that write them (positions of a cache); only a host
  // tensor's may be dereferenced on the host.
  int32_t* int32_data() {
    CheckType(DType::kI32);
    return static_cast<int32_t*>(data_.get());
  }

  // A host tensor of T's dtype (nullptr when empty).
  template <class T>
  T* host_data() {
    CheckHostAccess(DTypeOf<T>());
    return static_cast<T*>(data_.get());
  }
  template <class T>
  const T* host_data() const {
    CheckHostAccess(DTypeOf<T>());
    return static_cast<const T*>(data_.get());
  }
  // The bytes wherever they live, for a backend's kernels (device pointers are not host-readable).
  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }

  // Same data, new shape with the same element count. CHECK-fails otherwise (programmer bug).
  void Reshape(Shape shape);

 private:
  // CHECK-fails unless the tensor is empty or holds `dtype`.
  void CheckType(DType dtype) const {
    RIPPLEKV_CHECK(empty() || (dtype_ == dtype && "access with the wrong element type"));
  }
  // CHECK-fails unless the tensor is empty or a host tensor of `dtype`.
  void CheckHostAccess(DType dtype) const {
    RIPPLEKV_CHECK(empty() || (device_ == Device::kCpu && "host access to a device tensor"));
    CheckType(dtype);
  }

  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;  // the allocator's, kept here for cheap checked access
  std::unique_ptr<void, internal::TensorRelease> data_;
};

// A 1-D int32 tensor holding `values` on `allocator`'s device (positions and indices for device
// ops).
Tensor Int32Tensor(std::span<const int32_t> values, Allocator& allocator = HostAllocator());

// `t` on the host: itself when it is there already, else a copy.
Tensor OnHost(Tensor t);

}  // namespace ripplekv::kernels
