#include "kernels/ops/activation.h"

#include "kernels/ops/cpu/activation_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/activation.h"
#endif

namespace ripplekv::kernels {

Status SwiGlu(const OpContext& ctx, const ConstTensorView& gate, const ConstTensorView& up,
              const TensorView& out) {
  constexpr const char* kOp = "SwiGlu";
  if (gate.shape != up.shape) return internal::ShapeError(kOp, "up must match gate", up.shape);
  if (out.shape != gate.shape) return internal::ShapeError(kOp, "out must match gate", out.shape);
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, gate, up, out));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(kOp,
                                  cuda::SwiGlu(ctx, gate.data, up.data, out.data, gate.numel()));
  }
#endif
  cpu::SwiGlu(ctx.num_threads, gate.data, up.data, out.data, gate.numel());
  return absl::OkStatus();
}

Status AddTo(const OpContext& ctx, const ConstTensorView& x, const TensorView& y) {
  constexpr const char* kOp = "AddTo";
  if (x.shape != y.shape) return internal::ShapeError(kOp, "y must match x", y.shape);
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, x, y));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(kOp, cuda::AddTo(ctx, x.data, y.data, x.numel()));
  }
#endif
  cpu::AddTo(ctx.num_threads, x.data, y.data, x.numel());
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
