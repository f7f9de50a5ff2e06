#pragma once
// CPU block decoders behind dequant.h. No checks here: the front end validated every size.

#include <cstdint>

#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels::cpu {

// Decodes `n_blocks` consecutive blocks of `type` (block geometry from TraitsOf) from `src`
// (n_blocks * block_bytes bytes, any alignment) into `dst` (n_blocks * block_elements floats).
// Uses the AVX2 decoders when this CPU has AVX2 and F16C (checked once), the portable ones
// otherwise; both write the same bits. Thread-safe (reads src, writes only dst).
void DequantizeBlocks(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst);

// The portable decoders: the fallback, and the reference the AVX2 decoders are tested against.
void DequantizeBlocksScalar(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst);

// The AVX2 + F16C decoders (dequant_avx2.cc). Bit-identical to DequantizeBlocksScalar for every
// input, every fp16 scale (zero, subnormal, infinite and NaN included) and every F16/BF16 pattern.
// Call only when DequantAvx2Supported(); on other CPUs (and non-x86 builds, where it forwards to
// the scalar decoders) it must not be reached.
void DequantizeBlocksAvx2(GgmlType type, const uint8_t* src, int64_t n_blocks, float* dst);
// Whether this CPU runs the AVX2 decoders (AVX2 and F16C). Thread-safe and cheap: the CPU is asked
// once per process (cpu_features.h).
bool DequantAvx2Supported();

// Decodes `n_rows` rows of `row_elements` values each (a whole number of blocks), splitting rows
// across OpenMP threads when the tensor is large. Same bytes in, same floats out, at any thread
// count.
void DequantizeRows(GgmlType type, const uint8_t* src, int64_t n_rows, int64_t row_elements,
                    float* dst);

}  // namespace ripplekv::kernels::cpu
