#pragma once
// The GGML tensor types RippleKV reads, numbered as in the GGUF file format, and the geometry of
// their blocks. Dequantization lives in dequant.h.

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "kernels/tensor/tensor.h"

namespace ripplekv::kernels {

enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30,
};

// Every type above: the plain ones first, then the block-quantized ones (kGgmlTypes + 3 on).
inline constexpr GgmlType kGgmlTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
    GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
};

struct GgmlTypeTraits {
  std::string_view name;    // "q4_1"
  int64_t block_elements;   // elements per block (1 for F32/F16/BF16)
  int64_t block_bytes;      // bytes per block
};

// Traits for a raw type id from a file; InvalidArgument/Unimplemented naming the id when unknown.
StatusOr<GgmlTypeTraits> TraitsOf(uint32_t raw_type);
GgmlTypeTraits TraitsOf(GgmlType type);

}  // namespace ripplekv::kernels
