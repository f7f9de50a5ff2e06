#pragma once
// Decoding of GGML tensor data (plain and block-quantized, see ggml_types.h) to fp32.
//
// One front end checks sizes once and dispatches on the destination's device; the backends
// (dequant_cpu.h today, a CUDA one later) assume checked input. Callers never pick a backend.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/dequant/ggml_types.h"

namespace ripplekv::kernels {

// Bytes that `n_elements` values of `type` occupy. InvalidArgument when n_elements is negative,
// is not a whole number of blocks, or the byte count overflows int64.
StatusOr<int64_t> GgmlBytes(GgmlType type, int64_t n_elements);

// Decodes `src` (the encoded tensor, host memory, any alignment) into `dst`.
// `dst` has rank >= 1; its last dimension is the row (GGUF ne[0]) and must be a whole number of
// blocks, because GGML blocks never straddle rows; src.size() must equal
// GgmlBytes(type, dst.numel()). Errors: InvalidArgument on a size or shape mismatch (message gives
// both sizes), Unimplemented when dst lives on a device without a dequant backend.
// Thread-safe for distinct destinations; large tensors are decoded with OpenMP threads.
[[nodiscard]] Status Dequantize(GgmlType type, std::span<const uint8_t> src, const TensorView& dst);

}  // namespace ripplekv::kernels
