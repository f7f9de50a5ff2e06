#include "kernels/ops/gather.h"

#include "kernels/ops/cpu/gather_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/gather.h"
#endif

namespace ripplekv::kernels {

namespace {

// InvalidArgument naming the first entry of `ids` outside [0, limit).
Status CheckIds(const char* op, const char* what, Int32View ids, int64_t limit) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", what, " ", ids[i], " at index ", i, " outside [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status GatherRows(const OpContext& ctx, const ConstTensorView& src, Int32View rows,
                  const TensorView& out) {
  constexpr const char* kOp = "GatherRows";
  if (src.rank() != 2) return internal::ShapeError(kOp, "src must be [N, D]", src.shape);
  const int64_t n = src.dim(0), d = src.dim(1);
  if (out.rank() != 2 || out.dim(0) != static_cast<int64_t>(rows.size()) || out.dim(1) != d) {
    return internal::ShapeError(kOp, absl::StrCat("out must be [", rows.size(), ", ", d, "]"),
                                out.shape);
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, src, out, rows));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {  // indices live on the device: unchecked there (contract)
    return internal::FromLauncher(
        kOp, cuda::GatherRows(ctx, src.data, d, rows.data(), static_cast<int64_t>(rows.size()),
                              out.data));
  }
#endif
  RETURN_IF_ERROR(CheckIds(kOp, "row", rows, n));
  cpu::GatherRows(src.data, d, rows.data(), static_cast<int64_t>(rows.size()), out.data);
  return absl::OkStatus();
}

Status CopyRows(const OpContext& ctx, const ConstTensorView& src, int64_t first,
                const TensorView& out) {
  constexpr const char* kOp = "CopyRows";
  if (src.rank() != 2) return internal::ShapeError(kOp, "src must be [N, D]", src.shape);
  if (out.rank() != 2 || out.dim(1) != src.dim(1)) {
    return internal::ShapeError(kOp, absl::StrCat("out must be [R, ", src.dim(1), "]"), out.shape);
  }
  if (first < 0 || first + out.dim(0) > src.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": rows [", first, ", ", first + out.dim(0),
                                                   ") outside [0, ", src.dim(0), ")"));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, src, out));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::CopyRows(ctx, src.data, src.dim(1), first, out.dim(0), out.data));
  }
#endif
  cpu::CopyRows(src.data, src.dim(1), first, out.dim(0), out.data);
  return absl::OkStatus();
}

Status EmbeddingLookup(const OpContext& ctx, const Weight& table, Int32View tokens,
                       const TensorView& out) {
  constexpr const char* kOp = "EmbeddingLookup";
  if (table.rank() != 2) return internal::ShapeError(kOp, "table must be [V, D]", table.shape());
  const int64_t d = table.cols();
  if (out.rank() != 2 || out.dim(0) != static_cast<int64_t>(tokens.size()) || out.dim(1) != d) {
    return internal::ShapeError(kOp, absl::StrCat("out must be [", tokens.size(), ", ", d, "]"),
                                out.shape);
  }
  RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, out, tokens));  // stored weights: host
  RETURN_IF_ERROR(CheckIds(kOp, "token id", tokens, table.rows()));
  cpu::EmbeddingLookup(table, tokens.data(), static_cast<int64_t>(tokens.size()), out.data);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
