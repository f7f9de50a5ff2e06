#include "kernels/ops/linear.h"

#include "base/strings.h"
#include "kernels/ops/cpu/linear_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/linear.h"
#endif

namespace ripplekv::kernels {
namespace {

constexpr const char* kOp = "Linear";

// The shapes of y = x * W^T (+ bias) for a weight of shape `w` ([N, K]), and the devices of x, y
// and the bias. InvalidArgument naming the tensor at fault.
Status CheckLinear(const OpContext& ctx, const ConstTensorView& x, const Shape& w,
                   const ConstTensorView& bias, const TensorView& y) {
  if (x.rank() != 2) return internal::ShapeError(kOp, "x must be [M, K]", x.shape);
  if (w.size() != 2 || w[1] != x.dim(1)) {
    return internal::ShapeError(kOp, absl::StrCat("w must be [N, ", x.dim(1), "]"), w);
  }
  if (y.rank() != 2 || y.dim(0) != x.dim(0) || y.dim(1) != w[0]) {
    return internal::ShapeError(kOp, absl::StrCat("y must be [", x.dim(0), ", ", w[0], "]"),
                                y.shape);
  }
  if (bias.data != nullptr && (bias.rank() != 1 || bias.dim(0) != w[0])) {
    return internal::ShapeError(kOp, absl::StrCat("bias must be [", w[0], "]"), bias.shape);
  }
  return bias.data != nullptr ? internal::CheckDeviceOf(kOp, true, ctx, x, y, bias)
                              : internal::CheckDeviceOf(kOp, true, ctx, x, y);
}

// The device GEMM over fp32 or bf16 weights `w` (device memory).
Status DeviceLinear(const OpContext& ctx, const ConstTensorView& x, const void* w, bool w_bf16,
                    int64_t n, const ConstTensorView& bias, const TensorView& y,
                    const LinearOptions& options) {
#if RIPPLEKV_WITH_CUDA
  return internal::FromLauncher(kOp, cuda::Linear(ctx, x.data, w, w_bf16, bias.data, y.data,
                                                  x.dim(0), n, x.dim(1), options.accumulate));
#else
  (void)x, (void)w, (void)w_bf16, (void)n, (void)bias, (void)y, (void)options;
  return absl::UnimplementedError(Cat(kOp, ": no ", DeviceName(ctx.device), " backend"));
#endif
}

}  // namespace

Status Linear(const OpContext& ctx, const ConstTensorView& x, const ConstTensorView& w,
              const ConstTensorView& bias, const TensorView& y, const LinearOptions& options) {
  RETURN_IF_ERROR(CheckLinear(ctx, x, w.shape, bias, y));
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, true, ctx, w));
  if (ctx.device != Device::kCpu) {
    return DeviceLinear(ctx, x, w.data, /*w_bf16=*/false, w.dim(0), bias, y, options);
  }
  cpu::Linear(ctx.num_threads, x.data, x.dim(1), w.data, bias.data, y.data, x.dim(0), w.dim(0),
              x.dim(1), options.accumulate);
  return absl::OkStatus();
}

Status Linear(const OpContext& ctx, const ConstTensorView& x, const Weight& w,
              const ConstTensorView& bias, const TensorView& y, const LinearOptions& options) {
  if (w.f32() != nullptr) return Linear(ctx, x, w.view(), bias, y, options);
  RETURN_IF_ERROR(CheckLinear(ctx, x, w.shape(), bias, y));
  if (w.device() != ctx.device) {
    return absl::InvalidArgumentError(Cat(kOp, ": the weight is on ", DeviceName(w.device()),
                                          ", the op runs on ", DeviceName(ctx.device)));
  }
  if (ctx.device != Device::kCpu) {
    return DeviceLinear(ctx, x, w.tensor().raw(), w.type() == GgmlType::kBF16, w.dim(0), bias, y,
                        options);
  }
  cpu::LinearStored(ctx.num_threads, x.data, x.dim(1), w, bias.data, y.data, x.dim(0),
                    options.accumulate);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
