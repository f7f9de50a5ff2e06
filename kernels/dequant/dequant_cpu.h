#pragma once
// CPU block decoders behind dequant.h. No checks here: the front end validated every size.

#include <cstdint>

#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels::cpu {

// Decodes `n_blocks` consecutive blocks of `type` (block geometry from TraitsOf) from `src`
// (n_blocks * block_bytes bytes, any alignment) into `dst` (n_blocks * block_elements floats).
void DequantizeBlocks(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst);

// Decodes `n_rows` rows of `row_elements` values each (a whole number of blocks), splitting rows
// across OpenMP threads when the tensor is large. Same bytes in, same floats out, at any thread
// count.
void DequantizeRows(GgmlType type, const uint8_t* src, int64_t n_rows, int64_t row_elements,
                    float* dst);

}  // namespace ripplekv::kernels::cpu
