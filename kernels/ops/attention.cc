#include "kernels/ops/attention.h"

#include "kernels/ops/cpu/attention_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/attention.h"
#endif

namespace ripplekv::kernels {

Status CausalAttention(const OpContext& ctx, const ConstTensorView& q, Int32View q_positions,
                       const KvCacheView& cache, float scale, const TensorView& out) {
  return CausalAttention(ctx, q, q_positions, std::span<const KvCacheView>(&cache, 1), scale, out);
}

Status CausalAttention(const OpContext& ctx, const ConstTensorView& q, Int32View q_positions,
                       std::span<const KvCacheView> segments, float scale, const TensorView& out) {
  constexpr const char* kOp = "CausalAttention";
  if (q.rank() != 3) return internal::ShapeError(kOp, "q must be [M, n_heads, head_dim]", q.shape);
  if (segments.empty()) return absl::InvalidArgumentError("CausalAttention: no cache segment");
  const int64_t n_heads = q.dim(1);
  for (size_t s = 0; s < segments.size(); ++s) {
    const KvCacheView& cache = segments[s];
    if (cache.n_kv_heads <= 0 || n_heads % cache.n_kv_heads != 0 ||
        cache.n_kv_heads != segments[0].n_kv_heads) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": segment ", s, ": ", n_heads, " query heads vs ", cache.n_kv_heads, " kv heads"));
    }
    if (cache.device != ctx.device) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": segment ", s, " is on another device than the op"));
    }
    if (q.dim(2) != cache.head_dim) {
      return internal::ShapeError(kOp, absl::StrCat("head_dim must be ", cache.head_dim), q.shape);
    }
    if (cache.length < 0 || cache.length > cache.capacity) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": segment ", s, ": cache length ",
                                                     cache.length, " outside [0, ", cache.capacity,
                                                     "]"));
    }
  }
  if (out.shape != q.shape) return internal::ShapeError(kOp, "out must match q", out.shape);
  if (static_cast<int64_t>(q_positions.size()) != q.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", q_positions.size(), " positions for ", q.dim(0), " queries"));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, q, out, q_positions));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    if (segments.size() > static_cast<size_t>(cuda::kMaxSegments) ||
        q.dim(2) > cuda::kMaxAttentionHeadDim) {
      return absl::UnimplementedError(absl::StrCat(
          kOp, ": the CUDA kernel takes at most ", cuda::kMaxSegments, " segments and head_dim ",
          cuda::kMaxAttentionHeadDim, ", got ", segments.size(), " and ", q.dim(2)));
    }
    cuda::CacheSegment device_segments[cuda::kMaxSegments];
    for (size_t s = 0; s < segments.size(); ++s) {
      const KvCacheView& c = segments[s];
      device_segments[s] = {c.k, c.v, c.positions, c.n_kv_heads, c.capacity, c.length, c.head_dim};
    }
    return internal::FromLauncher(
        kOp,
        cuda::CausalAttention(ctx, q.data, q_positions.data(), q.dim(0), n_heads, q.dim(2),
                              device_segments, static_cast<int>(segments.size()), scale, out.data));
  }
#endif
  cpu::CausalAttention(ctx.num_threads, q.data, q_positions.data(), q.dim(0), n_heads, segments,
                       scale, out.data);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
