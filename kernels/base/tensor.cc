#include "kernels/base/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/base/check.h"

namespace ripplekv::kernels {

namespace {
constexpr size_t kAlignment = 64;

float* AllocateZeroed(int64_t n) {
  if (n == 0) n = 1;  // keep data() non-null for empty-but-shaped tensors
  size_t bytes = (static_cast<size_t>(n) * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}
}  // namespace

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

void Tensor::FreeDeleter::operator()(float* p) const { std::free(p); }

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), data_(AllocateZeroed(NumElements(shape_))) {
  for (int64_t d : shape_) RIPPLEKV_CHECK(d >= 0);
}

Tensor::Tensor(Shape shape, std::span<const float> values) : Tensor(std::move(shape)) {
  RIPPLEKV_CHECK(static_cast<int64_t>(values.size()) == numel());
  std::memcpy(data_.get(), values.data(), values.size() * sizeof(float));
}

Tensor Tensor::Clone() const {
  if (empty()) return Tensor();
  Tensor t(shape_);
  std::memcpy(t.data(), data(), static_cast<size_t>(numel()) * sizeof(float));
  return t;
}

void Tensor::Reshape(Shape shape) {
  RIPPLEKV_CHECK(NumElements(shape) == numel());
  shape_ = std::move(shape);
}

}  // namespace ripplekv::kernels
