#include "kernels/ops/attention_stats.h"

#include "kernels/ops/cpu/attention_stats_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/attention_stats.h"
#endif

namespace ripplekv::kernels {

namespace {

// Checks q: [rows, n_heads, head_dim] against the cache view.
Status CheckShapes(const char* op, const ConstTensorView& q, const KvCacheView& keys,
                   int64_t rows) {
  if (q.rank() != 3 || q.dim(0) != rows || q.dim(2) != keys.head_dim || keys.n_kv_heads <= 0 ||
      q.dim(1) < keys.n_kv_heads || q.dim(1) % keys.n_kv_heads != 0 || q.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": q ", ShapeString(q.shape), " does not fit ", rows, " rows over ",
                     keys.n_kv_heads, " KV heads of dimension ", keys.head_dim));
  }
  if (keys.length <= 0 || keys.length > keys.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": cache length ", keys.length, " outside [1, ", keys.capacity, "]"));
  }
  return absl::OkStatus();
}

Status CheckOutput(const char* op, const char* name, std::span<double> out, int64_t expected) {
  if (static_cast<int64_t>(out.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " holds ", out.size(), " values, needs ", expected));
  }
  return absl::OkStatus();
}

// The message for a cache on another device than the op.
std::string OtherDevice(const char* op) {
  return absl::StrCat(op, ": the cache is on another device");
}

#if RIPPLEKV_WITH_CUDA
// The keys of a device cache as the CUDA backend takes them.
cuda::CacheSegment DeviceKeys(const KvCacheView& keys) {
  return cuda::CacheSegment{.k = keys.k,
                            .v = keys.v,
                            .positions = keys.positions,
                            .n_kv_heads = keys.n_kv_heads,
                            .capacity = keys.capacity,
                            .length = keys.length,
                            .head_dim = keys.head_dim};
}
#endif

}  // namespace

Status WindowAttentionStats(const OpContext& ctx, const ConstTensorView& q, const KvCacheView& keys,
                            double scale, double entropy_epsilon, std::span<double> sum,
                            std::span<double> sumsq, double* entropy) {
  constexpr const char* kOp = "WindowAttentionStats";
  const int64_t w = q.rank() == 3 ? q.dim(0) : 0;
  if (w <= 0 || w > keys.length) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": window of ", w, " queries for a cache of ", keys.length, " entries"));
  }
  RETURN_IF_ERROR(CheckShapes(kOp, q, keys, w));
  if (keys.device != ctx.device) return absl::InvalidArgumentError(OtherDevice(kOp));
  RETURN_IF_ERROR(CheckOutput(kOp, "sum", sum, q.dim(1) * keys.length));
  RETURN_IF_ERROR(CheckOutput(kOp, "sumsq", sumsq, q.dim(1) * keys.length));
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, q));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::WindowAttentionStats(ctx, q.data, w, q.dim(1), DeviceKeys(keys), scale,
                                        entropy_epsilon, sum.data(), sumsq.data(), entropy));
  }
#endif
  *entropy = cpu::WindowAttentionStats(ctx.num_threads, q.data, w, q.dim(1), keys, scale,
                                       entropy_epsilon, sum.data(), sumsq.data());
  return absl::OkStatus();
}

Status AccumulatedAttention(const OpContext& ctx, const ConstTensorView& q, const KvCacheView& keys,
                            double scale, std::span<double> accumulated) {
  constexpr const char* kOp = "AccumulatedAttention";
  RETURN_IF_ERROR(CheckShapes(kOp, q, keys, keys.length));
  if (keys.device != ctx.device) return absl::InvalidArgumentError(OtherDevice(kOp));
  RETURN_IF_ERROR(CheckOutput(kOp, "accumulated", accumulated, keys.n_kv_heads * keys.length));
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, q));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::AccumulatedAttention(ctx, q.data, q.dim(1), DeviceKeys(keys), scale,
                                        accumulated.data()));
  }
#endif
  cpu::AccumulatedAttention(ctx.num_threads, q.data, q.dim(1), keys, scale, accumulated.data());
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
