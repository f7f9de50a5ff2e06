#pragma once
// Execution settings every op receives explicitly (no globals for device or threads).

#include "kernels/base/device.h"

namespace ripplekv::kernels {

struct OpContext {
  Device device = Device::kCpu;  // where the op runs; all tensors passed must live there
  int num_threads = 1;           // CPU worker threads (OpenMP and OpenBLAS share one pool)
};

}  // namespace ripplekv::kernels
