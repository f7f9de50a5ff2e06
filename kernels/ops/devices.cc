#include "kernels/ops/devices.h"

#include <charconv>

#include "base/strings.h"

#if RIPPLEKV_WITH_CUDA
#include "kernels/ops/cuda/cuda_device.h"
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

std::string DeviceFault() {
#if RIPPLEKV_WITH_CUDA
  return cuda::Fault();
#else
  return "";
#endif
}

#if RIPPLEKV_WITH_CUDA
namespace internal {

Status FromLauncher(const char* op, int code) {
  if (code == 0) return absl::OkStatus();
  if (cuda::IsOutOfMemory(code)) {
    return absl::ResourceExhaustedError(Cat(op, ": out of device memory for its temporaries"));
  }
  return absl::UnavailableError(
      Cat(op, ": device fault: ", cuda::Fault(), " (the device is unusable for this process)"));
}

}  // namespace internal
#endif

StatusOr<Allocator*> DeviceAllocator(const DeviceSpec& spec) {
  if (spec.device == Device::kCpu) return &HostAllocator();
  const int count = DeviceCount(spec.device);
  if (count == 0) {
    return absl::FailedPreconditionError(Cat("no usable ", DeviceName(spec.device),
                                             " device: ", DeviceUnavailableReason(spec.device)));
  }
  if (spec.ordinal < 0 || spec.ordinal >= count) {
    return absl::OutOfRangeError(Cat(DeviceSpecName(spec), ": this machine has ", count, " ",
                                     DeviceName(spec.device), " device(s)"));
  }
#if RIPPLEKV_WITH_CUDA
  return cuda::DeviceAllocatorFor(spec.ordinal);
#else
  return absl::FailedPreconditionError("unreachable: no CUDA backend");
#endif
}

StatusOr<DeviceSession> DeviceSession::Open(const DeviceSpec& spec, int num_threads,
                                            size_t workspace_bytes) {
  if (num_threads < 1) {
    return absl::InvalidArgumentError(Cat("num_threads must be >= 1, got ", num_threads));
  }
  ASSIGN_OR_RETURN(Allocator * allocator, DeviceAllocator(spec));
  DeviceSession session;
  session.spec_ = spec;
  session.allocator_ = allocator;
  session.ctx_.num_threads = num_threads;
  if (spec.device == Device::kCpu) return session;
#if RIPPLEKV_WITH_CUDA
  std::string why;
  if (!cuda::OpenSession(spec.ordinal, workspace_bytes, &session.ctx_, &why)) {
    return absl::FailedPreconditionError(Cat(DeviceSpecName(spec), ": ", why));
  }
  session.owned_allocator_.reset(cuda::NewStreamAllocator(session.ctx_));
  session.allocator_ = session.owned_allocator_.get();
  return session;
#else
  (void)workspace_bytes;
  return absl::FailedPreconditionError("unreachable: no CUDA backend");
#endif
}

DeviceSession::DeviceSession(DeviceSession&& other) noexcept
    : spec_(other.spec_),
      ctx_(other.ctx_),
      allocator_(other.allocator_),
      owned_allocator_(std::move(other.owned_allocator_)) {
  other.ctx_ = OpContext();
}

DeviceSession& DeviceSession::operator=(DeviceSession&& other) noexcept {
  if (this != &other) {
    Release();
    spec_ = other.spec_;
    ctx_ = other.ctx_;
    allocator_ = other.allocator_;
    owned_allocator_ = std::move(other.owned_allocator_);
    other.ctx_ = OpContext();
  }
  return *this;
}

DeviceSession::~DeviceSession() { Release(); }

void DeviceSession::Release() noexcept {
  owned_allocator_.reset();
#if RIPPLEKV_WITH_CUDA
  if (ctx_.device == Device::kCuda) cuda::CloseSession(&ctx_);
#endif
  ctx_ = OpContext();
}

Status DeviceSession::Synchronize() const {
#if RIPPLEKV_WITH_CUDA
  if (ctx_.device == Device::kCuda) {
    std::string why;
    if (!cuda::Synchronize(ctx_, &why)) {
      return absl::UnavailableError(Cat(DeviceSpecName(spec_), ": device fault: ", why,
                                        " (the device is unusable for this process)"));
    }
  }
#endif
  return absl::OkStatus();
}

StatusOr<DeviceSession::Memory> DeviceSession::DeviceMemory() const {
#if RIPPLEKV_WITH_CUDA
  if (ctx_.device == Device::kCuda) {
    size_t free_bytes = 0, total_bytes = 0;
    std::string why;
    if (!cuda::MemoryInfo(ctx_.ordinal, &free_bytes, &total_bytes, &why)) {
      return absl::InternalError(Cat(DeviceSpecName(spec_), ": ", why));
    }
    return Memory{.used_bytes = static_cast<int64_t>(total_bytes - free_bytes),
                  .total_bytes = static_cast<int64_t>(total_bytes)};
  }
#endif
  return absl::NotFoundError(Cat(DeviceSpecName(spec_), " has no device memory of its own"));
}

}  // namespace ripplekv::kernels
