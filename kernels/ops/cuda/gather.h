#pragma once
// The CUDA launchers of the row gathers for its front end (kernels/ops/gather.h), with the front
// end's contract; every pointer (int32 ones too) is device memory unless named host_*. Launchers
// queue their work on ctx.stream (cuda_device.h). Free of Abseil, which nvcc does not compile.

#include <cstdint>

#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

[[nodiscard]] int GatherRows(const OpContext& ctx, const float* src, int64_t d, const int32_t* rows,
                int64_t n_rows, float* out);
[[nodiscard]] int CopyRows(const OpContext& ctx, const float* src, int64_t d, int64_t first, int64_t n_rows,
              float* out);

}  // namespace ripplekv::kernels::cuda
