#pragma once
// What a worker's numbers depend on, reported at registration as RegisterRequest.numerics
// (proto/ripplekv/v1/worker.proto): "<device class>/<build>", e.g.
//   cpu-fp32/ripplekv 0.1.0 (66373207cffc) x86-64-v3 openblas-0.3.21-Haswell
// Two workers that report the same string give bit-identical results (the engine is
// deterministic); the scheduler compares the results of workers that differ within a tolerance
// for their device classes, the part before the first '/' (docs/SCHEDULER.md, "Verified
// results"). Thread-safe.

#include <string>
#include <string_view>

#include "kernels/tensor/device.h"
#include "kernels/tensor/dtype.h"

namespace ripplekv::worker {

// "cpu-fp32" for the CPU (whatever --weights: stored weights give the fp32 path's results);
// "cuda-bf16" or "cuda-f32" for CUDA, by the weights on the device (--device-weights).
std::string NumericsDeviceClass(kernels::Device device, kernels::DType device_weights);

// The instruction set this file was compiled for (the whole tree shares its flags, -march=native
// by default), from the compiler's predefined macros: "x86-64-v4" (AVX-512F), "x86-64-v3" (AVX2
// and FMA), "x86-64-v2" (SSE4.2 and POPCNT), "x86-64-v1", "aarch64", else "unknown". Compiled
// code's vectorization and FMA contraction depend on it, so results can too.
std::string_view CompiledIsa();

// The BLAS the device's GEMMs run in: for the CPU "openblas-VERSION-CORE" with the kernel core
// OpenBLAS picked for this CPU at run time (its GEMM blocking, so its sums, depend on it), e.g.
// "openblas-0.3.21-Haswell"; for CUDA "cublas".
std::string NumericsBlas(kernels::Device device);

// "<device class>/<version> <isa> <blas>".
std::string FormatNumerics(std::string_view device_class, std::string_view version,
                           std::string_view isa, std::string_view blas);

// This process's string: FormatNumerics of NumericsDeviceClass, BuildVersion(), CompiledIsa()
// and NumericsBlas, then " tpN" for a tensor-parallel group of N > 1 ranks (its partial sums
// are added in another order, so its results differ from a whole worker's in the last bits).
std::string WorkerNumerics(kernels::Device device, kernels::DType device_weights,
                           int tensor_parallel = 1);

}  // namespace ripplekv::worker
