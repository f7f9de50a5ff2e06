#pragma once
// Element types of tensors. The CPU ops compute in fp32; 16-bit types hold weights and activations
// a device backend computes on (bf16 GEMM inputs), int32 holds token positions and indices.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ripplekv::kernels {

enum class DType { kF32, kF16, kBF16, kI32 };

constexpr size_t DTypeSize(DType t) { return t == DType::kF16 || t == DType::kBF16 ? 2 : 4; }

constexpr std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
  }
  return "unknown";
}

// The DType of a C++ element type that host code reads directly (float and int32_t; the 16-bit
// types have no C++ arithmetic type here and are converted by kernels).
template <class T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}

}  // namespace ripplekv::kernels
