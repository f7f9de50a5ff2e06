#pragma once
// The stream a launcher queues on (for the .cu files of the CUDA backend).

#include <cuda_runtime.h>

#include "kernels/ops/cuda/cuda_device.h"

namespace ripplekv::kernels::cuda {

// Makes ctx.ordinal the calling thread's device; ctx.stream as a cudaStream_t.
inline cudaStream_t StreamOf(const OpContext& ctx) {
  return static_cast<cudaStream_t>(Activate(ctx));
}

}  // namespace ripplekv::kernels::cuda
