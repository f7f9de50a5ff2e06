#pragma once
// The devices this build and this machine offer, and their allocators. The CPU is always there;
// CUDA devices exist when the build has the CUDA backend (RIPPLEKV_CUDA, on wherever the toolkit
// is found) and the machine has a driver and a GPU.

#include <string>
#include <string_view>

#include "kernels/base/allocator.h"
#include "kernels/base/device.h"
#include "kernels/base/status.h"

namespace ripplekv::kernels {

// A device and its ordinal among the devices of its kind ("cuda:1" is {kCuda, 1}).
struct DeviceSpec {
  Device device = Device::kCpu;
  int ordinal = 0;
};

// Parses "cpu", "cuda" (ordinal 0) or "cuda:N". InvalidArgument naming the text otherwise.
[[nodiscard]] StatusOr<DeviceSpec> ParseDevice(std::string_view text);
// "cpu", "cuda:N".
std::string DeviceSpecName(const DeviceSpec& spec);

// How many devices of `device`'s kind are usable: 1 for the CPU; for CUDA, the visible GPUs (0
// without the backend, a driver or a GPU). Thread-safe; asks the driver once per process.
int DeviceCount(Device device);
// Why no device of that kind is usable ("" when one is), for error messages and test skips,
// e.g. "this build has no CUDA backend" or the CUDA runtime's own words.
std::string DeviceUnavailableReason(Device device);

// The allocator of `spec` (lives for the process). FailedPrecondition naming the reason when the
// device is not usable, OutOfRange when the ordinal is not below DeviceCount.
[[nodiscard]] StatusOr<Allocator*> DeviceAllocator(const DeviceSpec& spec);

}  // namespace ripplekv::kernels
