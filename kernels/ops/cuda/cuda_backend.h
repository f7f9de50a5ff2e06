#pragma once
// The CUDA backend's entry points for the op front ends and devices.cc (internal: include only
// from kernels/ops/). Launchers take device pointers the front ends checked and run on the
// current device's default stream; they return after queuing (callers copy results back with the
// allocator, which synchronizes).

#include <cstdint>
#include <string>

#include "kernels/base/allocator.h"

namespace ripplekv::kernels::cuda {

// Visible CUDA devices; 0 and the runtime's reason in *why when there are none.
int DeviceCount(std::string* why);
// The allocator of device `ordinal` (< DeviceCount), created on first use, alive for the process.
Allocator* DeviceAllocatorFor(int ordinal);

// The ops of kernels/ops/*.h, same contracts, fp32 on the device.
void RmsNorm(const float* x, const float* weight, float eps, float* y, int64_t m, int64_t d);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace ripplekv::kernels::cuda
