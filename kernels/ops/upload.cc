#include "kernels/ops/upload.h"

#include <memory>

#include "base/strings.h"
#include "kernels/ops/dispatch.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/upload.h"
#endif

namespace ripplekv::kernels {

StatusOr<Weight> UploadWeight(const DeviceSession& session, const Weight& w, DType dtype) {
  constexpr const char* kOp = "UploadWeight";
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        Cat(kOp, ": device weights are f32 or bf16, not ", DTypeName(dtype)));
  }
  if (w.device() != Device::kCpu) {
    return absl::InvalidArgumentError(Cat(kOp, ": the weight is already on a device"));
  }
  const OpContext& ctx = session.context();
  if (ctx.device == Device::kCpu) {
    return absl::InvalidArgumentError(Cat(kOp, ": the session is on the CPU"));
  }
  RETURN_IF_ERROR(internal::CheckDeviceOf(kOp, /*on_cuda=*/true, ctx));
  if (w.empty()) return Weight();
  Allocator& device = session.allocator();
  Tensor out(w.shape(), dtype, device);
#if RIPPLEKV_WITH_CUDA
  // The bytes as stored (fp32 for expanded weights), decoded on the device.
  const GgmlType type = w.f32() != nullptr ? GgmlType::kF32 : w.type();
  const std::span<const uint8_t> bytes =
      w.f32() != nullptr
          ? std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w.f32()),
                                     static_cast<size_t>(w.rows() * w.cols()) * sizeof(float))
          : w.RowBytes(0, w.rows());
  if (!cuda::HasDecoder(static_cast<uint32_t>(type))) {
    return absl::UnimplementedError(
        Cat(kOp, ": no device decoder for ", TraitsOf(type).name, " weights"));
  }
  const std::unique_ptr<void, internal::TensorRelease> staged(device.Allocate(bytes.size()),
                                                              {&device});
  device.CopyFromHost(staged.get(), bytes.data(), bytes.size());
  RETURN_IF_ERROR(internal::FromLauncher(
      kOp, cuda::DequantizeRows(ctx, static_cast<uint32_t>(type), staged.get(), w.rows(), w.cols(),
                                dtype == DType::kBF16, out.raw())));
  RETURN_IF_ERROR(session.Synchronize());  // before the staged bytes are freed
#endif
  return Weight(std::move(out));
}

}  // namespace ripplekv::kernels
