#pragma once
// Where a tensor lives and where an op runs. Ops take tensors and dispatch on their device:
// callers never pick a backend function themselves.

#include <string_view>

namespace ripplekv::kernels {

enum class Device { kCpu, kCuda };

constexpr std::string_view DeviceName(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

}  // namespace ripplekv::kernels
