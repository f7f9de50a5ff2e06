#include "kernels/ops/rope.h"

#include <cmath>
#include <numbers>

#include "kernels/ops/cpu/rope_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/rope.h"
#endif

namespace ripplekv::kernels {

StatusOr<RopeTable> MakeRopeTable(int head_dim, float theta, RopePairing pairing,
                                  std::span<const float> freq_factors,
                                  const Llama3Scaling& llama3) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope: head_dim must be even, got ", head_dim));
  }
  if (!(theta > 0.0f)) return absl::InvalidArgumentError("rope: theta must be > 0");
  const int half = head_dim / 2;
  if (!freq_factors.empty() && static_cast<int>(freq_factors.size()) != half) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope: freq_factors must have ", half, " entries, got ", freq_factors.size()));
  }
  RopeTable table;
  table.pairing = pairing;
  table.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    double inv = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (!freq_factors.empty()) inv /= freq_factors[i];
    if (llama3.factor > 0.0f) {
      // Llama 3.1 scaling (as in HF's _compute_llama3_parameters): long wavelengths are slowed
      // by `factor`, short ones kept, the band between interpolated smoothly.
      const double old_ctx = llama3.original_max_positions;
      const double low_wavelen = old_ctx / llama3.low_freq_factor;
      const double high_wavelen = old_ctx / llama3.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / inv;
      if (wavelen > low_wavelen) {
        inv /= llama3.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - llama3.low_freq_factor) /
                              (llama3.high_freq_factor - llama3.low_freq_factor);
        inv = (1.0 - smooth) * inv / llama3.factor + smooth * inv;
      }
    }
    table.inv_freq[i] = static_cast<float>(inv);
  }
  return table;
}

Status ApplyRope(const OpContext& ctx, const RopeTable& table, Int32View positions,
                 const TensorView& x) {
  constexpr const char* kOp = "ApplyRope";
  if (x.rank() != 3) return internal::ShapeError(kOp, "x must be [M, H, head_dim]", x.shape);
  if (x.dim(2) != 2 * static_cast<int64_t>(table.inv_freq.size())) {
    return internal::ShapeError(kOp, absl::StrCat("head_dim must be ", 2 * table.inv_freq.size()),
                                x.shape);
  }
  if (static_cast<int64_t>(positions.size()) != x.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", positions.size(), " positions for ", x.dim(0), " rows"));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, x, positions));
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    const int64_t pairs = static_cast<int64_t>(table.inv_freq.size());
    if (pairs > cuda::kMaxRopePairs) {
      return absl::UnimplementedError(absl::StrCat(
          kOp, ": head_dim ", 2 * pairs, " over the CUDA kernel's ", 2 * cuda::kMaxRopePairs));
    }
    return internal::FromLauncher(
        kOp, cuda::ApplyRope(ctx, table.inv_freq.data(), pairs,
                             table.pairing == RopePairing::kInterleaved, positions.data(), x.data,
                             x.dim(0), x.dim(1), x.dim(2)));
  }
#endif
  cpu::ApplyRope(ctx.num_threads, table, positions.data(), x.data, x.dim(0), x.dim(1), x.dim(2));
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
