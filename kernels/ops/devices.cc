#include "kernels/ops/devices.h"

#include <charconv>

#include "kernels/base/strings.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/cuda_backend.h"
#endif

namespace ripplekv::kernels {

StatusOr<DeviceSpec> ParseDevice(std::string_view text) {
  if (text == "cpu") return DeviceSpec{Device::kCpu, 0};
  if (text == "cuda") return DeviceSpec{Device::kCuda, 0};
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (text.substr(0, kCudaPrefix.size()) == kCudaPrefix) {
    const std::string_view digits = text.substr(kCudaPrefix.size());
    int ordinal = -1;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
    if (!digits.empty() && err == std::errc() && end == digits.data() + digits.size() &&
        ordinal >= 0) {
      return DeviceSpec{Device::kCuda, ordinal};
    }
  }
  return absl::InvalidArgumentError(
      Cat("device '", text, "' is not cpu, cuda or cuda:N (N a device ordinal)"));
}

std::string DeviceSpecName(const DeviceSpec& spec) {
  if (spec.device == Device::kCpu) return "cpu";
  return Cat(DeviceName(spec.device), ":", spec.ordinal);
}

int DeviceCount(Device device) {
  if (device == Device::kCpu) return 1;
#if RIPPLEKV_WITH_CUDA
  return cuda::DeviceCount(nullptr);
#else
  return 0;
#endif
}

std::string DeviceUnavailableReason(Device device) {
  if (device == Device::kCpu) return "";
#if RIPPLEKV_WITH_CUDA
  std::string why;
  cuda::DeviceCount(&why);
  return why;
#else
  return "this build has no CUDA backend (the CUDA toolkit was not found, or RIPPLEKV_CUDA=OFF)";
#endif
}

StatusOr<Allocator*> DeviceAllocator(const DeviceSpec& spec) {
  if (spec.device == Device::kCpu) return &HostAllocator();
  const int count = DeviceCount(spec.device);
  if (count == 0) {
    return absl::FailedPreconditionError(Cat(
        "no usable ", DeviceName(spec.device), " device: ", DeviceUnavailableReason(spec.device)));
  }
  if (spec.ordinal < 0 || spec.ordinal >= count) {
    return absl::OutOfRangeError(Cat(DeviceSpecName(spec), ": this machine has ", count,
                                              " ", DeviceName(spec.device), " device(s)"));
  }
#if RIPPLEKV_WITH_CUDA
  return cuda::DeviceAllocatorFor(spec.ordinal);
#else
  return absl::FailedPreconditionError("unreachable: no CUDA backend");
#endif
}

}  // namespace ripplekv::kernels
