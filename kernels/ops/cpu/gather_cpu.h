#pragma once
// The CPU backend of the row gathers (kernels/ops/gather.h), called only by the front end after
// its checks (no re-validation).

#include <cstdint>

#include "kernels/dequant/weight.h"

namespace ripplekv::kernels::cpu {

// out = src rows [first, first + n_rows) (d floats each), one contiguous copy.
void CopyRows(const float* src, int64_t d, int64_t first, int64_t n_rows, float* out);
// out[i] = src row rows[i] (d floats each), i in [0, n_rows).
void GatherRows(const float* src, int64_t d, const int32_t* rows, int64_t n_rows, float* out);
// out[i] = table row tokens[i] expanded to fp32 (table.cols() floats each).
void EmbeddingLookup(const Weight& table, const int32_t* tokens, int64_t n, float* out);

}  // namespace ripplekv::kernels::cpu
