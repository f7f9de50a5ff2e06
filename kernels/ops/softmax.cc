#include "kernels/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops/communicator.h"
#include "kernels/ops/cpu/softmax_cpu.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/softmax.h"
#endif

namespace ripplekv::kernels {

namespace {

// x must be [M, V] with V >= 1 (every row has a maximum).
Status CheckLogits(const char* op, const ConstTensorView& x) {
  if (x.rank() != 2 || x.dim(1) == 0) {
    return internal::ShapeError(op, "x must be [M, V] with V > 0", x.shape);
  }
  return absl::OkStatus();
}

// Whether the vocabulary of the logits is split over the ranks of ctx.communicator.
bool VocabParallel(const OpContext& ctx) {
  return ctx.communicator != nullptr && ctx.communicator->size() > 1;
}

// Log-sum-exp of rows whose vocabulary is split over ranks: the maxima, then the sums of
// exp(x - max), each combined over ranks; on the op's device.
Status VocabParallelLogSumExp(const OpContext& ctx, const ConstTensorView& x,
                              std::span<float> lse) {
  const int64_t m = x.dim(0), v = x.dim(1);
  std::vector<double> maxima(static_cast<size_t>(m)), sums(static_cast<size_t>(m));
  const bool on_cuda = ctx.device == Device::kCuda;
#if RIPPLEKV_WITH_CUDA
  if (on_cuda)
    RETURN_IF_ERROR(
        internal::FromLauncher("LogSumExp", cuda::RowMaxima(ctx, x.data, m, v, maxima.data())));
#endif
  if (!on_cuda) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x.data + i * v;
      maxima[i] = *std::max_element(xi, xi + v);
    }
  }
  RETURN_IF_ERROR(ctx.communicator->AllReduceMax(maxima));
#if RIPPLEKV_WITH_CUDA
  if (on_cuda)
    RETURN_IF_ERROR(internal::FromLauncher(
        "LogSumExp", cuda::ExpSums(ctx, x.data, m, v, maxima.data(), sums.data())));
#endif
  if (!on_cuda) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x.data + i * v;
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(xi[j]) - maxima[i]);
      sums[i] = sum;
    }
  }
  RETURN_IF_ERROR(ctx.communicator->AllReduceSum(sums));
  for (int64_t i = 0; i < m; ++i) lse[i] = static_cast<float>(maxima[i] + std::log(sums[i]));
  return absl::OkStatus();
}

// The KL of rows whose vocabulary is split over ranks (softmax_cpu.cc's steps, combined over
// ranks); on the op's device.
Status VocabParallelKl(const OpContext& ctx, const ConstTensorView& p, const ConstTensorView& q,
                       std::span<float> out) {
  const int64_t m = p.dim(0), v = p.dim(1);
  std::vector<double> maxima(static_cast<size_t>(2 * m)), sums(static_cast<size_t>(3 * m));
  const bool on_cuda = ctx.device == Device::kCuda;
#if RIPPLEKV_WITH_CUDA
  if (on_cuda)
    RETURN_IF_ERROR(internal::FromLauncher(
        "KlDivergence", cuda::KlRowMaxima(ctx, p.data, q.data, m, v, maxima.data())));
#endif
  if (!on_cuda) cpu::KlRowMaxima(ctx.num_threads, p.data, q.data, m, v, maxima.data());
  RETURN_IF_ERROR(ctx.communicator->AllReduceMax(maxima));
#if RIPPLEKV_WITH_CUDA
  if (on_cuda)
    RETURN_IF_ERROR(internal::FromLauncher(
        "KlDivergence",
        cuda::KlPartialSums(ctx, p.data, q.data, m, v, maxima.data(), sums.data())));
#endif
  if (!on_cuda) {
    cpu::KlPartialSums(ctx.num_threads, p.data, q.data, m, v, maxima.data(), sums.data());
  }
  RETURN_IF_ERROR(ctx.communicator->AllReduceSum(sums));
  for (int64_t i = 0; i < m; ++i) out[i] = cpu::KlFromSums(sums.data() + 3 * i);
  return absl::OkStatus();
}

}  // namespace

Status LogSumExp(const OpContext& ctx, const ConstTensorView& x, std::span<float> lse) {
  constexpr const char* kOp = "LogSumExp";
  RETURN_IF_ERROR(CheckLogits(kOp, x));
  if (static_cast<int64_t>(lse.size()) != x.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": lse must have ", x.dim(0), " entries, got ", lse.size()));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, x));
  if (VocabParallel(ctx)) return VocabParallelLogSumExp(ctx, x, lse);
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(kOp,
                                  cuda::LogSumExp(ctx, x.data, x.dim(0), x.dim(1), lse.data()));
  }
#endif
  cpu::LogSumExp(ctx.num_threads, x.data, x.dim(0), x.dim(1), lse.data());
  return absl::OkStatus();
}

Status LogSoftmax(const OpContext& ctx, const ConstTensorView& x, const TensorView& y) {
  constexpr const char* kOp = "LogSoftmax";
  RETURN_IF_ERROR(CheckLogits(kOp, x));
  if (y.shape != x.shape) return internal::ShapeError(kOp, "y must match x", y.shape);
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, x, y));
  const int64_t m = x.dim(0), v = x.dim(1);
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(kOp, cuda::LogSoftmax(ctx, x.data, m, v, y.data));
  }
#endif
  std::vector<float> lse(static_cast<size_t>(m));
  cpu::LogSumExp(ctx.num_threads, x.data, m, v, lse.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < v; ++j) y.data[i * v + j] = x.data[i * v + j] - lse[i];
  }
  return absl::OkStatus();
}

Status KlDivergenceRows(const OpContext& ctx, const ConstTensorView& p_logits,
                        const ConstTensorView& q_logits, std::span<float> out) {
  constexpr const char* kOp = "KlDivergenceRows";
  if (p_logits.rank() != 2 || p_logits.dim(1) == 0) {
    return internal::ShapeError(kOp, "p_logits must be [M, V] with V > 0", p_logits.shape);
  }
  if (q_logits.shape != p_logits.shape) {
    return internal::ShapeError(
        kOp, absl::StrCat("q_logits must match p_logits ", ShapeString(p_logits.shape)),
        q_logits.shape);
  }
  if (static_cast<int64_t>(out.size()) != p_logits.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": out must have ", p_logits.dim(0), " entries, got ", out.size()));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx, p_logits, q_logits));
  if (VocabParallel(ctx)) return VocabParallelKl(ctx, p_logits, q_logits, out);
#if RIPPLEKV_WITH_CUDA
  if (ctx.device == Device::kCuda) {
    return internal::FromLauncher(
        kOp, cuda::KlDivergenceRows(ctx, p_logits.data, q_logits.data, p_logits.dim(0),
                                    p_logits.dim(1), out.data()));
  }
#endif
  cpu::KlDivergenceRows(ctx.num_threads, p_logits.data, q_logits.data, p_logits.dim(0),
                        p_logits.dim(1), out.data());
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
