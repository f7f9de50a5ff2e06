#include "kernels/dequant/gemv.h"

#include <limits>

#include "base/strings.h"
#include "kernels/dequant/dequant.h"
#include "kernels/dequant/gemv_cpu.h"

namespace ripplekv::kernels {

bool GemvImplSupported(GemvImpl impl) {
  switch (impl) {
    case GemvImpl::kAuto:
    case GemvImpl::kScalar:
      return true;
    case GemvImpl::kAvx2:
      return cpu::CpuHasAvx2() && cpu::Avx2GemvKernel(GgmlType::kF32) != nullptr;
  }
  return false;
}

std::string_view GemvImplName(GemvImpl impl) {
  switch (impl) {
    case GemvImpl::kAuto:
      return "auto";
    case GemvImpl::kScalar:
      return "scalar";
    case GemvImpl::kAvx2:
      return "avx2";
  }
  return "unknown";
}

GemvImpl ResolvedGemvImpl(GemvImpl impl) {
  if (impl != GemvImpl::kAuto) return impl;
  return GemvImplSupported(GemvImpl::kAvx2) ? GemvImpl::kAvx2 : GemvImpl::kScalar;
}

Status DequantGemv(const GemvOptions& options, GgmlType type, std::span<const uint8_t> w,
                   int64_t rows, int64_t cols, std::span<const float> x, std::span<float> y) {
  const GgmlTypeTraits traits = TraitsOf(type);
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(Cat("DequantGemv: negative shape [", rows, ", ", cols, "]"));
  }
  if (cols % traits.block_elements != 0) {
    return absl::InvalidArgumentError(
        Cat("DequantGemv: row of ", cols, " values is not a whole number of ",
            traits.block_elements, "-value ", traits.name, " blocks"));
  }
  ASSIGN_OR_RETURN(const int64_t row_bytes, GgmlBytes(type, cols));
  if (row_bytes > 0 && rows > std::numeric_limits<int64_t>::max() / row_bytes) {
    return absl::InvalidArgumentError(
        Cat("DequantGemv: ", traits.name, " [", rows, ", ", cols, "] overflows a byte count"));
  }
  if (static_cast<int64_t>(w.size()) != rows * row_bytes) {
    return absl::InvalidArgumentError(Cat("DequantGemv: ", traits.name, " [", rows, ", ", cols,
                                          "] needs ", rows, " x ", row_bytes, " = ",
                                          rows * row_bytes, " bytes, got ", w.size()));
  }
  if (static_cast<int64_t>(x.size()) != cols) {
    return absl::InvalidArgumentError(
        Cat("DequantGemv: x has ", x.size(), " values, W has ", cols, " columns"));
  }
  if (static_cast<int64_t>(y.size()) != rows) {
    return absl::InvalidArgumentError(
        Cat("DequantGemv: y has ", y.size(), " values, W has ", rows, " rows"));
  }
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(
        Cat("DequantGemv: num_threads must be >= 1, got ", options.num_threads));
  }
  const GemvImpl impl = ResolvedGemvImpl(options.impl);
  if (!GemvImplSupported(impl)) {
    return absl::FailedPreconditionError(
        Cat("DequantGemv: the ", GemvImplName(impl),
            " implementation needs AVX2, FMA and F16C, which this CPU or build lacks"));
  }
  if (rows == 0) return absl::OkStatus();
  const cpu::GemvRowKernel kernel =
      impl == GemvImpl::kAvx2 ? cpu::Avx2GemvKernel(type) : cpu::ScalarGemvKernel(type);
  cpu::GemvRows(kernel, w.data(), row_bytes, rows, cols / traits.block_elements, x.data(), y.data(),
                options.num_threads);
  return absl::OkStatus();
}

}  // namespace ripplekv::kernels
