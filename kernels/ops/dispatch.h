#pragma once
// Shared checks of the op front ends.

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/ops/devices.h"
#include "kernels/ops/op_context.h"
#include "kernels/tensor/tensor.h"

#ifndef RIPPLEKV_WITH_CUDA
#define RIPPLEKV_WITH_CUDA 0
#endif

namespace ripplekv::kernels::internal {

// Whether this build has the CUDA backend (kernels/ops/cuda/).
constexpr bool kHaveCuda = RIPPLEKV_WITH_CUDA != 0;

// OK when every view lives on ctx.device and the op can run there: every op runs on the CPU;
// `on_cuda` says whether this op has a CUDA kernel (in a build with the backend). Unimplemented
// otherwise, so callers need not change as backends gain ops; FailedPrecondition, with the
// runtime's reason, when the op has a CUDA kernel but the machine has no usable CUDA device.
template <typename... Views>
Status CheckDeviceOf(const char* op, bool on_cuda, const OpContext& ctx, const Views&... views) {
  bool same = ((views.device == ctx.device) && ...);
  if (!same) return absl::InvalidArgumentError(absl::StrCat(op, ": tensors on different devices"));
  if (ctx.device == Device::kCpu) return absl::OkStatus();
  if (ctx.device == Device::kCuda && on_cuda && kHaveCuda) {
    if (DeviceCount(Device::kCuda) > 0) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": no usable cuda device: ", DeviceUnavailableReason(Device::kCuda)));
  }
  return absl::UnimplementedError(
      absl::StrCat(op, ": no ", std::string(DeviceName(ctx.device)), " backend"));
}

// CheckDeviceOf for an op that runs on the CPU only.
template <typename... Views>
Status CheckDevice(const char* op, const OpContext& ctx, const Views&... views) {
  return CheckDeviceOf(op, false, ctx, views...);
}

#if RIPPLEKV_WITH_CUDA
// The Status of a CUDA launcher's code (kernels/ops/cuda/cuda_device.h LaunchResult): OK for 0;
// ResourceExhausted when the device was out of memory for the op's temporaries; otherwise
// Unavailable (retry elsewhere) naming `op` and the process's device fault (DeviceFault).
Status FromLauncher(const char* op, int code);
#endif

inline Status ShapeError(const char* op, const std::string& what, const Shape& got) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, ", got ", ShapeString(got)));
}

}  // namespace ripplekv::kernels::internal
