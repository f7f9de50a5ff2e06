#pragma once
// The CUDA launchers of weight upload for its front end (kernels/ops/upload.h), with the front
// end's contract; every pointer (int32 ones too) is device memory unless named host_*. Launchers
// queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// Expands `rows` rows of `cols` values stored in GGML type `ggml_type` (a GgmlType's number; the
// bytes as in the file, device memory) into out [rows, cols] (device memory): bf16 (round to
// nearest even) when to_bf16, fp32 otherwise. The fp32 values equal the CPU's dequantization
// (kernels/dequant/dequant.h) bit for bit. `ggml_type` must have a decoder (HasDecoder); returns
// the LaunchResult (cuda_device.h).
[[nodiscard]] int DequantizeRows(const OpContext& ctx, uint32_t ggml_type, const void* blocks, int64_t rows,
                   int64_t cols, bool to_bf16, void* out);
// Whether GGML type `ggml_type` has a device decoder.
bool HasDecoder(uint32_t ggml_type);

}  // namespace ripplekv::kernels::cuda
