#pragma once
// CPU row kernels behind gemv.h. No checks here: the front end validated every size.

#include <cstdint>

#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels::cpu {

// Returns sum_k dequant(row)[k] * x[k] for one row of `n_blocks` blocks (n_blocks values for
// F32/F16/BF16); `row` has any alignment. A fixed summation order for given inputs.
using GemvRowKernel = float (*)(const uint8_t* row, const float* x, int64_t n_blocks);

// The portable kernel for `type` (gemv_cpu.cc): decodes up to 256 values at a time into a stack
// buffer with DequantizeBlocksScalar and accumulates their dot with x.
GemvRowKernel ScalarGemvKernel(GgmlType type);

// The AVX2 + FMA + F16C kernel for `type` (gemv_avx2.cc), or nullptr when this build has none
// (not x86-64). Call it only when CpuHasAvx2() is true.
GemvRowKernel Avx2GemvKernel(GgmlType type);
// Whether this CPU runs AVX2, FMA and F16C code.
bool CpuHasAvx2();

// y[r] = kernel(w + r * row_bytes, x, n_blocks) for r in [0, rows), rows split statically across
// `num_threads` OpenMP threads (each row on one thread, so results do not depend on the count).
void GemvRows(GemvRowKernel kernel, const uint8_t* w, int64_t row_bytes, int64_t rows,
              int64_t n_blocks, const float* x, float* y, int num_threads);

}  // namespace ripplekv::kernels::cpu
