#pragma once
// Shared checks of the op front ends.

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/base/status.h"
#include "kernels/base/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::internal {

// OK when every view lives on ctx.device; CPU is the only backend built today, so a CUDA
// context is Unimplemented until the CUDA kernels land (callers need not change then).
template <typename... Views>
Status CheckDevice(const char* op, const OpContext& ctx, const Views&... views) {
  bool same = ((views.device == ctx.device) && ...);
  if (!same) return absl::InvalidArgumentError(absl::StrCat(op, ": tensors on different devices"));
  if (ctx.device != Device::kCpu) {
    return absl::UnimplementedError(absl::StrCat(op, ": no ", std::string(DeviceName(ctx.device)), " backend"));
  }
  return absl::OkStatus();
}

inline Status ShapeError(const char* op, const std::string& what, const Shape& got) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, ", got ", ShapeString(got)));
}

}  // namespace ripplekv::kernels::internal
