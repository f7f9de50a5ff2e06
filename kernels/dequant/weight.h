#pragma once
// A weight matrix kept in its stored type (docs/DESIGN.md §4: weights stay compact and are
// expanded per slice at use). Either
//   * stored: GGML-encoded bytes (quantized blocks, F16, BF16 or F32) that live elsewhere, e.g. in
//     a memory-mapped model file, kept alive by a shared owner; or
//   * expanded: an owned fp32 Tensor (the reference path, `--weights f32`, and tests); or
//   * on a device: an owned fp32 or bf16 Tensor in a device's memory, made by UploadWeight
//     (kernels/ops/upload.h) for the device's GEMMs.
// Rows are the output features: shape [rows, cols], row-major, each row a whole number of blocks.
// Expanding a row gives exactly the fp32 values that dequantizing the whole tensor gives, so
// computing on expanded slices is bit-identical to computing on a tensor expanded at load.
// Immutable after construction; safe to read from several threads.

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {

class Weight {
 public:
  Weight() = default;
  // Expanded fp32 weights (implicit: a Tensor is a Weight): an fp32 host tensor, or an fp32 or
  // bf16 device tensor (CHECK-fails on other dtypes).
  Weight(Tensor tensor);  // NOLINT(google-explicit-constructor)

  // Stored weights: `bytes` encode `shape` ([rows, cols] or [n] for a vector) in `type`; `owner`
  // keeps the memory of `bytes` alive for the Weight's life (may be null when the caller
  // guarantees that). InvalidArgument when the sizes disagree (message gives both) or cols is not
  // a whole number of blocks; an F32 `bytes` must be 4-byte aligned.
  [[nodiscard]] static StatusOr<Weight> Stored(GgmlType type, std::span<const uint8_t> bytes,
                                               Shape shape, std::shared_ptr<const void> owner);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t rows() const { return shape_.empty() ? 0 : rank() == 1 ? 1 : shape_[0]; }
  int64_t cols() const { return shape_.empty() ? 0 : shape_.back(); }
  bool empty() const { return shape_.empty(); }
  // kF32 for expanded weights; kF32 or kBF16 for device weights.
  GgmlType type() const { return type_; }
  // Where the values live: kCpu unless the weight was uploaded to a device.
  Device device() const { return device_; }
  // The owned tensor of expanded or device weights (empty for stored weights).
  const Tensor& tensor() const { return expanded_; }
  // The fp32 values when they are held as fp32 on the host (expanded, or stored F32); nullptr
  // otherwise.
  const float* f32() const { return f32_; }
  // The stored bytes of rows [row0, row0 + n) (empty for expanded weights).
  std::span<const uint8_t> RowBytes(int64_t row0, int64_t n) const;
  // Bytes the weights occupy in memory (stored bytes, or 4 per element when expanded).
  int64_t MemoryBytes() const;

  // Rows [row0, row0 + n) of a host matrix as a Weight of the same form: stored rows share the
  // bytes (and their owner), no copy; expanded rows are copied. InvalidArgument outside the
  // matrix. (Tensor-parallel shards take the rows of column-parallel projections this way.)
  [[nodiscard]] StatusOr<Weight> Rows(int64_t row0, int64_t n) const;
  // Columns [col0, col0 + n) of a host matrix, compact: when both ends fall on block boundaries
  // the stored blocks of every row are copied (same type, 1/cols of the bytes per column);
  // otherwise, or for expanded weights, the fp32 values. InvalidArgument outside the matrix.
  // (Row-parallel shards.)
  [[nodiscard]] StatusOr<Weight> Columns(int64_t col0, int64_t n) const;

  // Writes rows [row0, row0 + n) as fp32 into `out` (n * cols floats). No bounds check beyond a
  // CHECK (callers index within shape()). Host weights only (CHECK). Single-threaded; safe to call
  // concurrently.
  void ExpandRows(int64_t row0, int64_t n, float* out) const;
  // The whole matrix as fp32 (a copy). Host weights only (CHECK).
  Tensor Expand() const;
  // A view for fp32 weights on the host (f32() != nullptr) or a device; CHECK-fails otherwise.
  ConstTensorView view() const;

 private:
  Shape shape_;
  GgmlType type_ = GgmlType::kF32;
  Device device_ = Device::kCpu;
  Tensor expanded_;                    // when expanded or on a device
  std::span<const uint8_t> bytes_;     // when stored
  std::shared_ptr<const void> owner_;  // keeps bytes_ alive
  int64_t row_bytes_ = 0;              // stored bytes per row
  const float* f32_ = nullptr;
};

}  // namespace ripplekv::kernels
