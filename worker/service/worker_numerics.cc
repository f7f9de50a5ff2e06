#include "worker/service/worker_numerics.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "kernels/ops/cpu/openblas_version.h"

namespace ripplekv::worker {

std::string NumericsDeviceClass(kernels::Device device, kernels::DType device_weights) {
  if (device == kernels::Device::kCpu) return "cpu-fp32";
  return device_weights == kernels::DType::kBF16 ? "cuda-bf16" : "cuda-f32";
}

std::string_view CompiledIsa() {
#if defined(__x86_64__)
#if defined(__AVX512F__)
  return "x86-64-v4";
#elif defined(__AVX2__) && defined(__FMA__)
  return "x86-64-v3";
#elif defined(__SSE4_2__) && defined(__POPCNT__)
  return "x86-64-v2";
#else
  return "x86-64-v1";
#endif
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

std::string NumericsBlas(kernels::Device device) {
  if (device == kernels::Device::kCuda) return "cublas";
  // OpenBlasVersion(): "0.3.21 (DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64)".
  std::string version = kernels::OpenBlasVersion();
  if (const size_t space = version.find(' '); space != std::string::npos) version.resize(space);
  const char* core = openblas_get_corename();
  return absl::StrCat("openblas-", version, "-", core != nullptr ? core : "unknown");
}

std::string FormatNumerics(std::string_view device_class, std::string_view version,
                           std::string_view isa, std::string_view blas) {
  std::string out(device_class);
  for (const std::string_view part :
       {std::string_view("/"), version, std::string_view(" "), isa, std::string_view(" "), blas}) {
    out += part;
  }
  return out;
}

std::string WorkerNumerics(kernels::Device device, kernels::DType device_weights,
                           int tensor_parallel) {
  std::string out = FormatNumerics(NumericsDeviceClass(device, device_weights), BuildVersion(),
                                   CompiledIsa(), NumericsBlas(device));
  if (tensor_parallel > 1) out += " tp" + std::to_string(tensor_parallel);
  return out;
}

}  // namespace ripplekv::worker
