#pragma once
// Block layout facts for tests and benchmarks that build GGML blocks by hand (header-only).

#include <vector>

#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {

// Byte offsets of the fp16 scale fields in one block (empty for the plain types).
inline std::vector<int> ScaleOffsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};  // d and m (q4_1, q5_1) or d and dmin (q4_k, q5_k)
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

}  // namespace ripplekv::kernels
