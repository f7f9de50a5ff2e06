#pragma once
// Owning fp32 `Tensor` and non-owning `TensorView`. Row-major; the last dimension is contiguous.
// Host memory is 64-byte aligned so SIMD loads and BLAS calls never straddle cache lines.
// Not thread-safe for concurrent mutation; concurrent reads are fine.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/base/device.h"

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

// Owns a zero-initialized fp32 buffer on the host. Move-only.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::span<const float> values);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  Tensor Clone() const;

  const Shape& shape() const { return shape_; }
  // 0 for a default-constructed (empty) tensor.
  int64_t numel() const { return data_ ? NumElements(shape_) : 0; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  bool empty() const { return data_ == nullptr; }
  Device device() const { return Device::kCpu; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::span<float> span() { return {data_.get(), static_cast<size_t>(numel())}; }
  std::span<const float> span() const { return {data_.get(), static_cast<size_t>(numel())}; }

  TensorView view() { return {data_.get(), shape_, Device::kCpu}; }
  ConstTensorView view() const { return {data_.get(), shape_, Device::kCpu}; }

  // Same data, new shape with the same element count. CHECK-fails otherwise (programmer bug).
  void Reshape(Shape shape);

 private:
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  Shape shape_;
  std::unique_ptr<float[], FreeDeleter> data_;
};

}  // namespace ripplekv::kernels
