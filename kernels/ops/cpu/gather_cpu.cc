// Row copies on the host: one memcpy (or one row expansion) per gathered row.

#include <cstring>

#include "kernels/ops/cpu/gather_cpu.h"

namespace ripplekv::kernels::cpu {

void GatherRows(const float* src, int64_t d, const int32_t* rows, int64_t n_rows, float* out) {
  for (int64_t i = 0; i < n_rows; ++i) {
    std::memcpy(out + i * d, src + rows[i] * d, static_cast<size_t>(d) * sizeof(float));
  }
}

void CopyRows(const float* src, int64_t d, int64_t first, int64_t n_rows, float* out) {
  if (n_rows > 0) std::memcpy(out, src + first * d, static_cast<size_t>(n_rows * d) * sizeof(float));
}

void EmbeddingLookup(const Weight& table, const int32_t* tokens, int64_t n, float* out) {
  const int64_t d = table.cols();
  for (int64_t i = 0; i < n; ++i) table.ExpandRows(tokens[i], 1, out + i * d);
}

}  // namespace ripplekv::kernels::cpu
