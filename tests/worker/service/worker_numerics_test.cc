// RegisterRequest.numerics: the device class and build a worker reports.
#include "worker/service/worker_numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "base/version.h"

namespace ripplekv::worker {
namespace {

TEST(WorkerNumericsTest, FormatIsDeviceClassSlashVersionIsaAndBlas) {
  EXPECT_EQ(FormatNumerics("cpu-fp32", "ripplekv 0.1.0 (66373207cffc)", "x86-64-v3",
                           "openblas-0.3.21-Haswell"),
            "cpu-fp32/ripplekv 0.1.0 (66373207cffc) x86-64-v3 openblas-0.3.21-Haswell");
}

TEST(WorkerNumericsTest, DeviceClassIsCpuFp32OrCudaByTheDeviceWeights) {
  EXPECT_EQ(NumericsDeviceClass(kernels::Device::kCpu, kernels::DType::kBF16), "cpu-fp32");
  EXPECT_EQ(NumericsDeviceClass(kernels::Device::kCpu, kernels::DType::kF32), "cpu-fp32");
  EXPECT_EQ(NumericsDeviceClass(kernels::Device::kCuda, kernels::DType::kBF16), "cuda-bf16");
  EXPECT_EQ(NumericsDeviceClass(kernels::Device::kCuda, kernels::DType::kF32), "cuda-f32");
}

TEST(WorkerNumericsTest, CompiledIsaNamesAnArchitectureLevel) {
  const std::set<std::string> known = {"x86-64-v1", "x86-64-v2", "x86-64-v3",
                                       "x86-64-v4", "aarch64",   "unknown"};
  EXPECT_TRUE(known.contains(std::string(CompiledIsa()))) << CompiledIsa();
#if defined(__x86_64__) && defined(__AVX512F__)
  EXPECT_EQ(CompiledIsa(), "x86-64-v4");  // the tree is compiled with one set of flags
#elif defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
  EXPECT_EQ(CompiledIsa(), "x86-64-v3");
#endif
}

TEST(WorkerNumericsTest, TheBlasIsOneWordNamingOpenBlasAndItsCoreOrCublas) {
  const std::string cpu = NumericsBlas(kernels::Device::kCpu);
  EXPECT_TRUE(cpu.starts_with("openblas-")) << cpu;
  EXPECT_EQ(cpu.find(' '), std::string::npos) << cpu;
  EXPECT_GE(std::count(cpu.begin(), cpu.end(), '-'), 2) << "version and core: " << cpu;
  EXPECT_EQ(NumericsBlas(kernels::Device::kCuda), "cublas");
}

TEST(WorkerNumericsTest, TheProcessReportsItsVersionAndTheDeviceClassBeforeTheFirstSlash) {
  const std::string cpu = WorkerNumerics(kernels::Device::kCpu, kernels::DType::kBF16);
  EXPECT_EQ(cpu, FormatNumerics("cpu-fp32", BuildVersion(), CompiledIsa(),
                                NumericsBlas(kernels::Device::kCpu)));
  EXPECT_EQ(cpu.substr(0, cpu.find('/')), "cpu-fp32");
  const std::string gpu = WorkerNumerics(kernels::Device::kCuda, kernels::DType::kF32);
  EXPECT_EQ(gpu.substr(0, gpu.find('/')), "cuda-f32");
  EXPECT_TRUE(gpu.ends_with(" cublas")) << gpu;
  // A tensor-parallel group adds its partial sums in another order: never bitwise a whole worker.
  EXPECT_EQ(WorkerNumerics(kernels::Device::kCpu, kernels::DType::kBF16, 2), cpu + " tp2");
  EXPECT_EQ(WorkerNumerics(kernels::Device::kCpu, kernels::DType::kBF16, 1), cpu);
}

}  // namespace
}  // namespace ripplekv::worker
