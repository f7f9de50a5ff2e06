#include "kernels/ops/kv_cache.h"

#include "kernels/ops/cpu/kv_cache_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/kv_cache.h"
#endif

namespace ripplekv::kernels {

namespace {

Status CheckLayer(const char* op, const OpContext& ctx, const KvLayerRef& layer) {
  if (layer.k == nullptr || layer.v == nullptr || layer.positions == nullptr ||
      layer.n_kv_heads <= 0 || layer.head_dim <= 0 || layer.length < 0 ||
      layer.length > layer.capacity) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": not a cache layer (", layer.n_kv_heads,
                                                   " heads of ", layer.head_dim, ", length ",
                                                   layer.length, " of ", layer.capacity, ")"));
  }
  if (layer.device != ctx.device) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the cache is on another device"));
  }
  return absl::OkStatus();
}

#if RIPPLEKV_WITH_CUDA
cuda::CacheLayer DeviceLayer(const KvLayerRef& l) {
  return {l.k, l.v, l.positions, l.n_kv_heads, l.capacity, l.length, l.head_dim};
}
#endif

}  // namespace

Status KvAppend(const OpContext& ctx, const ConstTensorView& k_rows, const ConstTensorView& v_rows,
                Int32View positions, const KvLayerRef& layer) {
  constexpr const char* kOp = "KvAppend";
  RETURN_IF_ERROR(CheckLayer(kOp, ctx, layer));
  const int64_t n = static_cast<int64_t>(positions.size());
  const Shape rows{n, static_cast<int64_t>(layer.n_kv_heads) * layer.head_dim};
  if (k_rows.shape != rows) {
    return internal::ShapeError(kOp, absl::StrCat("k_rows must be ", ShapeString(rows)),
                                k_rows.shape);
  }
  if (v_rows.shape != rows) {
    return internal::ShapeError(kOp, absl::StrCat("v_rows must be ", ShapeString(rows)),
                                v_rows.shape);
  }
  if (layer.length + n > layer.capacity) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: holds ", layer.length, " of ",
                                                     layer.capacity, " tokens, ", n,
                                                     " more requested"));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, k_rows, v_rows, positions));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(kOp, cuda::KvAppend(ctx, k_rows.data, v_rows.data,
                                                      positions.data(), n, DeviceLayer(layer)));
  }
#endif
  cpu::KvAppend(k_rows.data, v_rows.data, positions.data(), n, layer);
  return absl::OkStatus();
}

Status KvRetain(const OpContext& ctx, Int32View keep, int count, const KvLayerRef& layer) {
  constexpr const char* kOp = "KvRetain";
  RETURN_IF_ERROR(CheckLayer(kOp, ctx, layer));
  if (count < 0 ||
      static_cast<int64_t>(keep.size()) != static_cast<int64_t>(count) * layer.n_kv_heads) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": ", keep.size(), " indices for ",
                                                   layer.n_kv_heads, " heads keeping ", count));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, keep));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {  // indices live on the device: unchecked there (contract)
    return internal::FromLauncher(kOp, cuda::KvRetain(ctx, keep.data(), count, DeviceLayer(layer)));
  }
#endif
  for (int h = 0; h < layer.n_kv_heads; ++h) {
    const int32_t* idx = keep.data() + static_cast<int64_t>(h) * count;
    for (int j = 0; j < count; ++j) {
      if (idx[j] < 0 || idx[j] >= layer.length || (j > 0 && idx[j] <= idx[j - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat(kOp, ": head ", h, ": indices must be strictly increasing in [0, ",
                         layer.length, "), entry ", j, " is ", idx[j]));
      }
    }
  }
  cpu::KvRetain(keep.data(), count, layer);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
