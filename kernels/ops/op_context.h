#pragma once
// Execution settings every op receives explicitly (no globals for device, stream or threads).
// A CPU context is a plain value; a device context comes from a DeviceSession (devices.h), which
// owns the stream, the BLAS handle and the workspace the pointers below refer to.
// Kept free of Abseil and of backend headers: the CUDA backend's sources include it.

#include <cstddef>

#include "kernels/tensor/device.h"

namespace ripplekv::kernels {

// Collective operations over the ranks of one tensor-parallel worker (the tensor-parallel
// design, docs/DESIGN.md); declared here so a context can carry one.
class Communicator;

// Device scratch memory an op may use freely during its call (GEMM workspaces, dequantized weight
// slices). Ops on one context run one at a time, so they share it.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

struct OpContext {
  Device device = Device::kCpu;  // where the op runs; all tensors passed must live there
  int num_threads = 1;           // CPU worker threads (OpenMP and OpenBLAS share one pool)
  int ordinal = 0;               // which device of its kind ("cuda:1" is 1); 0 on the CPU
  // The device's queue (a cudaStream_t for CUDA); ops queue their work on it in call order and
  // results are ready once a copy to the host returns. Null on the CPU.
  void* stream = nullptr;
  // The BLAS library's handle bound to `stream` (a cublasHandle_t for CUDA); null on the CPU,
  // whose BLAS (OpenBLAS) has no handle.
  void* blas = nullptr;
  Workspace workspace;  // empty on the CPU (its ops allocate their own scratch per thread)
  // The ranks this op's tensors are split over; null for a model held whole by one rank.
  Communicator* communicator = nullptr;
};

}  // namespace ripplekv::kernels
