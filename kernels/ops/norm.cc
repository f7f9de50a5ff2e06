#include "kernels/ops/norm.h"

#include "kernels/ops/cpu/norm_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/norm.h"
#endif

namespace ripplekv::kernels {

Status RmsNorm(const OpContext& ctx, const ConstTensorView& x, const ConstTensorView& weight,
               float eps, const TensorView& y) {
  constexpr const char* kOp = "RmsNorm";
  if (x.rank() != 2) return internal::ShapeError(kOp, "x must be [M, D]", x.shape);
  if (weight.rank() != 1 || weight.dim(0) != x.dim(1)) {
    return internal::ShapeError(kOp, absl::StrCat("weight must be [", x.dim(1), "]"), weight.shape);
  }
  if (y.shape != x.shape) return internal::ShapeError(kOp, "y must match x", y.shape);
  if (!(eps > 0.0f)) return absl::InvalidArgumentError("RmsNorm: eps must be > 0");
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, x, weight, y));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::RmsNorm(ctx, x.data, weight.data, eps, y.data, x.dim(0), x.dim(1)));
  }
#endif
  cpu::RmsNorm(ctx.num_threads, x.data, weight.data, eps, y.data, x.dim(0), x.dim(1));
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
