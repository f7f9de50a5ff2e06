#include "kernels/tensor/tensor.h"

#include <cstring>

#include "base/check.h"

namespace ripplekv::kernels {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(Shape shape) : Tensor(std::move(shape), DType::kF32, HostAllocator()) {}

Tensor::Tensor(Shape shape, DType dtype, Allocator& allocator)
    : shape_(std::move(shape)), dtype_(dtype), device_(allocator.device()) {
  for (int64_t d : shape_) RIPPLEKV_CHECK(d >= 0);
  // At least one byte, so data() stays non-null for shaped tensors with no elements.
  const size_t bytes = static_cast<size_t>(NumElements(shape_)) * DTypeSize(dtype_);
  data_ = std::unique_ptr<void, internal::TensorRelease>(
      allocator.Allocate(bytes == 0 ? 1 : bytes), internal::TensorRelease{&allocator});
}

Tensor::Tensor(Shape shape, std::span<const float> values) : Tensor(std::move(shape)) {
  RIPPLEKV_CHECK(static_cast<int64_t>(values.size()) == numel());
  if (!values.empty()) std::memcpy(data_.get(), values.data(), values.size() * sizeof(float));
}

Tensor::Tensor(Shape shape, std::span<const int32_t> values)
    : Tensor(std::move(shape), DType::kI32) {
  RIPPLEKV_CHECK(static_cast<int64_t>(values.size()) == numel());
  if (!values.empty()) std::memcpy(data_.get(), values.data(), values.size() * sizeof(int32_t));
}

Tensor Tensor::Clone() const {
  if (empty()) return Tensor();
  return CopyTo(*data_.get_deleter().allocator);
}

Tensor Tensor::CopyTo(Allocator& allocator) const {
  if (empty()) return Tensor();
  Tensor t(shape_, dtype_, allocator);
  const Allocator& from = *data_.get_deleter().allocator;
  if (&from == &allocator) {
    allocator.Copy(t.raw(), raw(), bytes());
  } else if (from.device() == Device::kCpu) {
    allocator.CopyFromHost(t.raw(), raw(), bytes());
  } else if (allocator.device() == Device::kCpu) {
    from.CopyToHost(t.raw(), raw(), bytes());
  } else {  // between two device allocators: through a host buffer
    Tensor staging(shape_, dtype_, HostAllocator());
    from.CopyToHost(staging.raw(), raw(), bytes());
    allocator.CopyFromHost(t.raw(), staging.raw(), bytes());
  }
  return t;
}

void Tensor::Reshape(Shape shape) {
  RIPPLEKV_CHECK(NumElements(shape) == numel());
  shape_ = std::move(shape);
}

Tensor Int32Tensor(std::span<const int32_t> values, Allocator& allocator) {
  Tensor host({static_cast<int64_t>(values.size())}, values);
  return allocator.device() == Device::kCpu ? std::move(host) : host.CopyTo(allocator);
}

Tensor OnHost(Tensor t) { return t.device() == Device::kCpu ? std::move(t) : t.ToHost(); }

}  // namespace ripplekv::kernels
