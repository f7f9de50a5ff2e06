#include "kernels/dequant/dequant.h"
#include "base/strings.h"

#include <iterator>
#include <limits>
#include <string>

#include "fmt/format.h"
#include "kernels/dequant/dequant_cpu.h"

namespace ripplekv::kernels {

StatusOr<int64_t> GgmlBytes(GgmlType type, int64_t n_elements) {
  const GgmlTypeTraits traits = TraitsOf(type);
  if (n_elements < 0) {
    return absl::InvalidArgumentError(Cat("negative element count ", n_elements));
  }
  if (n_elements % traits.block_elements != 0) {
    return absl::InvalidArgumentError(Cat(n_elements, " ", traits.name,
                                          " values are not a whole number of ",
                                          traits.block_elements, "-value blocks"));
  }
  const int64_t blocks = n_elements / traits.block_elements;
  if (blocks > std::numeric_limits<int64_t>::max() / traits.block_bytes) {
    return absl::InvalidArgumentError(
        Cat(n_elements, " ", traits.name, " values overflow a 64-bit byte count"));
  }
  return blocks * traits.block_bytes;
}

Status Dequantize(GgmlType type, std::span<const uint8_t> src, const TensorView& dst) {
  const GgmlTypeTraits traits = TraitsOf(type);
  if (dst.rank() < 1) {
    return absl::InvalidArgumentError("Dequantize: destination must have rank >= 1");
  }
  for (int64_t d : dst.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          Cat("Dequantize: negative dimension in ", ShapeString(dst.shape)));
    }
  }
  const int64_t row = dst.dim(-1);
  if (row % traits.block_elements != 0) {
    return absl::InvalidArgumentError(
        Cat("Dequantize: row of ", row, " values is not a whole number of ", traits.block_elements,
            "-value ", traits.name, " blocks (shape ", ShapeString(dst.shape), ")"));
  }
  ASSIGN_OR_RETURN(const int64_t expected, GgmlBytes(type, dst.numel()));
  if (static_cast<int64_t>(src.size()) != expected) {
    return absl::InvalidArgumentError(Cat("Dequantize: ", traits.name, " ", ShapeString(dst.shape),
                                          " needs ", expected, " bytes, got ", src.size()));
  }
  if (dst.numel() == 0) return absl::OkStatus();
  if (dst.data == nullptr) return absl::InvalidArgumentError("Dequantize: null destination");
  switch (dst.device) {
    case Device::kCpu:
      cpu::DequantizeRows(type, src.data(), dst.numel() / row, row, dst.data);
      return absl::OkStatus();
    case Device::kCuda:
      break;
  }
  return absl::UnimplementedError(Cat("Dequantize: no ", DeviceName(dst.device), " backend"));
}

}  // namespace ripplekv::kernels
