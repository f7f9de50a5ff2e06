#include "kernels/ops/linear.h"

#include "kernels/ops/cpu/cpu_ops.h"
#include "kernels/ops/dispatch.h"

namespace ripplekv::kernels {

Status Linear(const OpContext& ctx, const ConstTensorView& x, const ConstTensorView& w,
              const ConstTensorView& bias, const TensorView& y, const LinearOptions& options) {
  constexpr const char* kOp = "Linear";
  if (x.rank() != 2) return internal::ShapeError(kOp, "x must be [M, K]", x.shape);
  if (w.rank() != 2 || w.dim(1) != x.dim(1)) {
    return internal::ShapeError(kOp, absl::StrCat("w must be [N, ", x.dim(1), "]"), w.shape);
  }
  if (y.rank() != 2 || y.dim(0) != x.dim(0) || y.dim(1) != w.dim(0)) {
    return internal::ShapeError(kOp, absl::StrCat("y must be [", x.dim(0), ", ", w.dim(0), "]"),
                                y.shape);
  }
  if (bias.data != nullptr && (bias.rank() != 1 || bias.dim(0) != w.dim(0))) {
    return internal::ShapeError(kOp, absl::StrCat("bias must be [", w.dim(0), "]"), bias.shape);
  }
  if (bias.data != nullptr) {
    RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, x, w, y, bias));
  } else {
    RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, x, w, y));
  }
  cpu::Linear(ctx.num_threads, x.data, x.dim(1), w.data, bias.data, y.data, x.dim(0), w.dim(0),
              x.dim(1), options.accumulate);
  return absl::OkStatus();
}

Status Linear(const OpContext& ctx, const ConstTensorView& x, const Weight& w,
              const ConstTensorView& bias, const TensorView& y, const LinearOptions& options) {
  if (w.f32() != nullptr) return Linear(ctx, x, w.view(), bias, y, options);
  // Shapes and devices are checked by the fp32 front end on a data-less view of the same shape.
  constexpr const char* kOp = "Linear";
  if (w.rank() != 2 || x.rank() != 2 || w.dim(1) != x.dim(1)) {
    return internal::ShapeError(
        kOp, absl::StrCat("w must be [N, ", x.rank() == 2 ? x.dim(1) : -1, "]"), w.shape());
  }
  if (y.rank() != 2 || y.dim(0) != x.dim(0) || y.dim(1) != w.dim(0)) {
    return internal::ShapeError(kOp, absl::StrCat("y must be [", x.dim(0), ", ", w.dim(0), "]"),
                                y.shape);
  }
  if (bias.data != nullptr && (bias.rank() != 1 || bias.dim(0) != w.dim(0))) {
    return internal::ShapeError(kOp, absl::StrCat("bias must be [", w.dim(0), "]"), bias.shape);
  }
  if (bias.data != nullptr) {
    RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, x, y, bias));
  } else {
    RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, x, y));
  }
  cpu::LinearStored(ctx.num_threads, x.data, x.dim(1), w, bias.data, y.data, x.dim(0),
                    options.accumulate);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
