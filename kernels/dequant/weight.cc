#include "kernels/dequant/weight.h"

#include <cstring>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/strings.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/dequant_cpu.h"

namespace ripplekv::kernels {

Weight::Weight(Tensor tensor)
    : shape_(tensor.shape()),
      type_(GgmlType::kF32),
      device_(tensor.device()),
      expanded_(std::move(tensor)) {
  if (expanded_.empty()) {
    shape_.clear();
    device_ = Device::kCpu;
    return;
  }
  row_bytes_ = cols() * static_cast<int64_t>(DTypeSize(expanded_.dtype()));
  if (device_ == Device::kCpu) {
    f32_ = expanded_.data();  // CHECKs fp32
    return;
  }
  RIPPLEKV_CHECK(expanded_.dtype() == DType::kF32 || expanded_.dtype() == DType::kBF16);
  type_ = expanded_.dtype() == DType::kF32 ? GgmlType::kF32 : GgmlType::kBF16;
}

StatusOr<Weight> Weight::Stored(GgmlType type, std::span<const uint8_t> bytes, Shape shape,
                                std::shared_ptr<const void> owner) {
  if (shape.empty() || shape.size() > 2) {
    return absl::InvalidArgumentError(
        Cat("stored weight: shape ", ShapeString(shape), " is not a vector or a matrix"));
  }
  const TensorView probe{nullptr, shape, Device::kCpu};
  const int64_t cols = shape.back();
  const GgmlTypeTraits traits = TraitsOf(type);
  if (cols % traits.block_elements != 0) {
    return absl::InvalidArgumentError(Cat("stored weight: rows of ", cols, " values are not a ",
                                          "whole number of ", traits.block_elements, "-value ",
                                          traits.name, " blocks"));
  }
  ASSIGN_OR_RETURN(const int64_t expected, GgmlBytes(type, probe.numel()));
  if (static_cast<int64_t>(bytes.size()) != expected) {
    return absl::InvalidArgumentError(Cat("stored weight: ", traits.name, " ", ShapeString(shape),
                                          " needs ", expected, " bytes, got ", bytes.size()));
  }
  Weight w;
  w.shape_ = std::move(shape);
  w.type_ = type;
  w.bytes_ = bytes;
  w.owner_ = std::move(owner);
  w.row_bytes_ = cols / traits.block_elements * traits.block_bytes;
  if (type == GgmlType::kF32) {
    if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
      return absl::InvalidArgumentError("stored weight: F32 data is not 4-byte aligned");
    }
    w.f32_ = reinterpret_cast<const float*>(bytes.data());
  }
  return w;
}

std::span<const uint8_t> Weight::RowBytes(int64_t row0, int64_t n) const {
  if (bytes_.empty()) return {};
  return bytes_.subspan(static_cast<size_t>(row0 * row_bytes_),
                        static_cast<size_t>(n * row_bytes_));
}

StatusOr<Weight> Weight::Rows(int64_t row0, int64_t n) const {
  RIPPLEKV_CHECK(device_ == Device::kCpu);
  if (rank() != 2 || row0 < 0 || n < 0 || row0 + n > rows()) {
    return absl::InvalidArgumentError(
        Cat("weight rows [", row0, ", ", row0 + n, ") outside ", ShapeString(shape_)));
  }
  if (bytes_.empty()) {  // expanded: copy the fp32 rows
    Tensor out({n, cols()});
    if (n > 0) ExpandRows(row0, n, out.data());
    return Weight(std::move(out));
  }
  return Stored(type_, RowBytes(row0, n), {n, cols()}, owner_);
}

StatusOr<Weight> Weight::Columns(int64_t col0, int64_t n) const {
  RIPPLEKV_CHECK(device_ == Device::kCpu);
  if (rank() != 2 || col0 < 0 || n <= 0 || col0 + n > cols()) {
    return absl::InvalidArgumentError(
        Cat("weight columns [", col0, ", ", col0 + n, ") outside ", ShapeString(shape_)));
  }
  const GgmlTypeTraits traits = TraitsOf(type_);
  const bool aligned = !bytes_.empty() && col0 % traits.block_elements == 0 &&
                       n % traits.block_elements == 0;
  if (aligned) {
    const int64_t first = col0 / traits.block_elements * traits.block_bytes;
    const int64_t width = n / traits.block_elements * traits.block_bytes;
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows() * width));
    for (int64_t r = 0; r < rows(); ++r) {
      std::memcpy(bytes->data() + r * width, bytes_.data() + r * row_bytes_ + first,
                  static_cast<size_t>(width));
    }
    const std::span<const uint8_t> view(*bytes);
    return Stored(type_, view, {rows(), n}, std::move(bytes));
  }
  Tensor out({rows(), n});
  std::vector<float> row(static_cast<size_t>(cols()));
  for (int64_t r = 0; r < rows(); ++r) {
    ExpandRows(r, 1, row.data());
    std::memcpy(out.data() + r * n, row.data() + col0, static_cast<size_t>(n) * sizeof(float));
  }
  return Weight(std::move(out));
}

int64_t Weight::MemoryBytes() const { return rows() * row_bytes_; }

void Weight::ExpandRows(int64_t row0, int64_t n, float* out) const {
  RIPPLEKV_CHECK(device_ == Device::kCpu);
  RIPPLEKV_CHECK(row0 >= 0 && n >= 0 && row0 + n <= rows());
  if (f32_ != nullptr) {
    std::memcpy(out, f32_ + row0 * cols(), static_cast<size_t>(n * cols()) * sizeof(float));
    return;
  }
  const GgmlTypeTraits traits = TraitsOf(type_);
  const int64_t row_blocks = cols() / traits.block_elements;
  for (int64_t r = 0; r < n; ++r) {
    cpu::DequantizeBlocks(type_, bytes_.data() + (row0 + r) * row_bytes_, row_blocks,
                          out + r * cols());
  }
}

Tensor Weight::Expand() const {
  RIPPLEKV_CHECK(device_ == Device::kCpu);
  Tensor out(shape_);
  if (rows() > 0 && cols() > 0) {
    if (f32_ != nullptr) {
      ExpandRows(0, rows(), out.data());
    } else {
      cpu::DequantizeRows(type_, bytes_.data(), rows(), cols(), out.data());
    }
  }
  return out;
}

ConstTensorView Weight::view() const {
  if (device_ != Device::kCpu) return expanded_.view();  // CHECKs fp32
  RIPPLEKV_CHECK(f32_ != nullptr);
  return {f32_, shape_, Device::kCpu};
}

}  // namespace ripplekv::kernels
