#pragma once
// Encoding of fp32 rows into GGML tensor types: the inverse of dequant.h, for writing GGUF files
// (bench/make-model's synthetic models, tests). Block formats use ggml's reference quantizers
// (quantize_row_*_ref in ggml-quants.c) bit for bit:
//   Q8_0: per block of 32, d = max|x| / 127, q = round(x / d) (half away from zero), d as fp16;
//   Q4_0: per block of 32, d = m / -8 where m is the element of largest magnitude (the first one
//         on ties, sign kept), q = min(15, trunc(x / d + 8.5)), d as fp16; byte j holds value j
//         in its low nibble and value j + 16 in its high nibble;
//   F16 / BF16: round to nearest even (fp16.h); F32: copied.
// So Dequantize(Quantize(x)) is within the format's error and Quantize(Dequantize(q)) == q for
// every block a quantizer can produce. Thread-safe: pure functions of their arguments.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {

// Whether QuantizeRow can write `type` (F32, F16, BF16, Q8_0, Q4_0).
bool CanQuantize(GgmlType type);

// Encodes the n = src.size() values of `src` into dst, which must hold exactly GgmlBytes(type, n)
// bytes (any alignment). Errors: InvalidArgument when n is not a whole number of blocks or the
// destination size differs (message gives both sizes), Unimplemented for a type CanQuantize
// refuses (named). Non-finite inputs give whatever the reference code gives (no check).
[[nodiscard]] Status QuantizeRow(GgmlType type, std::span<const float> src, std::span<uint8_t> dst);

}  // namespace ripplekv::kernels
