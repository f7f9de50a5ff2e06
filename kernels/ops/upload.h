#pragma once
// Weights moved to a device once, for the device's GEMMs (docs/DESIGN.md, the CUDA backend).

#include "base/status.h"
#include "kernels/dequant/weight.h"
#include "kernels/ops/devices.h"

namespace ripplekv::kernels {

// A copy of host weight `w` (stored or expanded) in `session`'s device memory as `dtype`: kBF16
// (the default compute type of device GEMMs: each value is the fp32 value the CPU decodes, rounded
// to nearest even) or kF32 (the exactness mode: the CPU's fp32 values bit for bit). The stored bytes
// cross to the device once and are decoded there; the result is ready when this returns.
// InvalidArgument for a dtype other than kF32/kBF16, a weight that is already on a device, or a
// session on the CPU; Unimplemented for a stored type without a device decoder.
[[nodiscard]] StatusOr<Weight> UploadWeight(const DeviceSession& session, const Weight& w,
                                            DType dtype);

}  // namespace ripplekv::kernels
