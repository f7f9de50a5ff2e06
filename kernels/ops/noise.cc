#include "kernels/ops/noise.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/ops/cpu/noise_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/noise.h"
#endif

namespace ripplekv::kernels {
namespace {

// Counter fields packed into 16 bits (noise contract in noise.h).
constexpr int64_t kMax16 = 65536;

// The bounds of the noise contract. Positions are read only on the host: in device memory they are
// the caller's to keep >= 0 (noise.h).
Status CheckNoiseArgs(const char* op, const NoiseKey& key, Int32View positions, int kv_head,
                      int64_t head_dim) {
  auto bad = [op](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
  };
  if (key.sample < 0) return bad(absl::StrCat("sample must be >= 0, got ", key.sample));
  if (key.layer < 0 || key.layer >= kMax16) {
    return bad(absl::StrCat("layer must be in [0, 65536), got ", key.layer));
  }
  if (key.trial < 0 || key.trial >= kMax16) {
    return bad(absl::StrCat("trial must be in [0, 65536), got ", key.trial));
  }
  if (kv_head < 0 || kv_head >= kMax16) {
    return bad(absl::StrCat("kv_head must be in [0, 65536), got ", kv_head));
  }
  if (head_dim <= 0 || head_dim % 4 != 0 || head_dim / 4 > kMax16) {
    return bad(
        absl::StrCat("head_dim must be a positive multiple of 4 and <= 262144, got ", head_dim));
  }
  for (size_t r = 0; positions.device == Device::kCpu && r < positions.size(); ++r) {
    if (positions[r] < 0) {
      return bad(absl::StrCat("positions[", r, "] must be >= 0, got ", positions[r]));
    }
  }
  return absl::OkStatus();
}

Status CheckAlpha(const char* op, float alpha) {
  if (alpha >= 0.0f && std::isfinite(alpha)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": alpha must be finite and >= 0, got ", alpha));
}

}  // namespace

Status DrawNormals(const OpContext& ctx, const NoiseKey& key, Int32View positions, int kv_head,
                   int head_dim, std::span<float> out) {
  constexpr const char* kOp = "DrawNormals";
  RETURN_IF_ERROR(internal::CheckDevice(kOp, ctx, positions));
  RETURN_IF_ERROR(CheckNoiseArgs(kOp, key, positions, kv_head, head_dim));
  const int64_t n = static_cast<int64_t>(positions.size());
  if (static_cast<int64_t>(out.size()) != n * head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": out must have ", n, " * ", head_dim, " entries, got ", out.size()));
  }
  cpu::DrawNormals(ctx.num_threads, key, positions.data(), n, kv_head, head_dim, out.data());
  return absl::OkStatus();
}

Status AddNormAdaptiveNoise(const OpContext& ctx, const NoiseKey& key, Int32View positions,
                            int kv_head, float alpha, const TensorView& values) {
  constexpr const char* kOp = "AddNormAdaptiveNoise";
  if (values.rank() != 2 || values.dim(0) != static_cast<int64_t>(positions.size())) {
    return internal::ShapeError(
        kOp, absl::StrCat("values must be [", positions.size(), " positions, head_dim]"),
        values.shape);
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, values, positions));
  RETURN_IF_ERROR(CheckNoiseArgs(kOp, key, positions, kv_head, values.dim(1)));
  RETURN_IF_ERROR(CheckAlpha(kOp, alpha));
  if (alpha == 0.0f || positions.empty()) return absl::OkStatus();
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::AddNormAdaptiveNoise(ctx, key.seed, key.sample, key.layer, key.trial,
                                        positions.data(), values.dim(0), kv_head,
                                        static_cast<int>(values.dim(1)), alpha, values.data));
  }
#endif
  cpu::AddNormAdaptiveNoise(ctx.num_threads, key, positions.data(), values.dim(0), kv_head, alpha,
                            values.data, values.dim(1), values.dim(1));
  return absl::OkStatus();
}

Status AddNormAdaptiveNoiseToRows(const OpContext& ctx, const NoiseKey& key, Int32View positions,
                                  int n_kv_heads, float alpha, const TensorView& values,
                                  int first_kv_head) {
  constexpr const char* kOp = "AddNormAdaptiveNoiseToRows";
  if (n_kv_heads < 1 || first_kv_head < 0 || values.rank() != 2 ||
      values.dim(0) != static_cast<int64_t>(positions.size()) || values.dim(1) % n_kv_heads != 0) {
    return internal::ShapeError(kOp,
                                absl::StrCat("values must be [", positions.size(), " positions, ",
                                             n_kv_heads, " KV heads * head_dim]"),
                                values.shape);
  }
  const int64_t head_dim = values.dim(1) / n_kv_heads;
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, values, positions));
  RETURN_IF_ERROR(CheckNoiseArgs(kOp, key, positions, first_kv_head + n_kv_heads - 1, head_dim));
  RETURN_IF_ERROR(CheckAlpha(kOp, alpha));
  if (alpha == 0.0f || positions.empty()) return absl::OkStatus();
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::AddNormAdaptiveNoiseToRows(
                 ctx, key.seed, key.sample, key.layer, key.trial, positions.data(), values.dim(0),
                 first_kv_head, n_kv_heads, static_cast<int>(head_dim), alpha, values.data));
  }
#endif
  for (int h = 0; h < n_kv_heads; ++h) {
    cpu::AddNormAdaptiveNoise(ctx.num_threads, key, positions.data(), values.dim(0),
                              first_kv_head + h, alpha, values.data + h * head_dim, head_dim,
                              values.dim(1));
  }
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
