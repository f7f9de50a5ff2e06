// The host emulation of CUDA (tests/cuda_host/emulator.h) catches the kernel bugs a GPU hides
// until the wrong moment: small kernels written here with a planted bug (a missing barrier, a
// missing wait for an async copy, a skipped tail) give wrong results (poison), and the same kernels
// written right give the exact answer. Also: launch errors, faults, warp shuffles. This file is
// CUDA: it goes through the same rewrite (rewrite_cuda.cc) as the backend's kernels.

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ripplekv::cuda_host {
namespace {

constexpr int kThreads = 256;

// Device memory holding `values`, copied back by Read().
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& values) : n_(values.size()) {
    EXPECT_EQ(cudaMalloc(&data_, n_ * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, values.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // Uninitialized (poisoned) device memory.
  explicit DeviceArray(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&data_, n * sizeof(T)), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  std::vector<T> Read() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

std::vector<float> Ramp(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 97) - 40.0f;
  return v;
}

double Sum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

// --- A block reduction, with and without the barrier between the writes and the tree. ---

template <bool kBarrierAfterWrites>
__global__ void BlockSumKernel(const float* x, float* out) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = x[blockIdx.x * kThreads + threadIdx.x];
  if (kBarrierAfterWrites) __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

TEST(CudaHostEmulatorTest, AMissingBarrierReadsPoisonAndTheBarrierFixesIt) {
  const std::vector<float> x = Ramp(2 * kThreads);
  const DeviceArray<float> dx(x);
  const DeviceArray<float> right(2), wrong(2);
  BlockSumKernel<true><<<2, kThreads>>>(dx.get(), right.get());
  BlockSumKernel<false><<<2, kThreads>>>(dx.get(), wrong.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> first(x.begin(), x.begin() + kThreads);
  const std::vector<float> second(x.begin() + kThreads, x.end());
  EXPECT_EQ(right.Read()[0], Sum(first));
  EXPECT_EQ(right.Read()[1], Sum(second));
  // Block 0 runs its threads in index order: thread t adds partial[t + 128] before thread t + 128
  // wrote it. (Block 1 runs them backward and happens to be right: the two orders together catch
  // a missing barrier whichever way the dependency points.)
  EXPECT_TRUE(std::isnan(wrong.Read()[0])) << wrong.Read()[0];
}

// A neighbour exchange: thread t reads what thread t - 1 wrote (the dependency the forward order
// alone would satisfy).
template <bool kBarrier>
__global__ void ShiftKernel(const float* x, float* out) {
  __shared__ float tile[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  tile[t] = x[blockIdx.x * kThreads + t];
  if (kBarrier) __syncthreads();
  out[blockIdx.x * kThreads + t] = tile[(t + kThreads - 1) % kThreads];
}

TEST(CudaHostEmulatorTest, AMissingBarrierIsCaughtWhicheverWayTheDependencyPoints) {
  const std::vector<float> x = Ramp(2 * kThreads);
  const DeviceArray<float> dx(x);
  const DeviceArray<float> right(x.size()), wrong(x.size());
  ShiftKernel<true><<<2, kThreads>>>(dx.get(), right.get());
  ShiftKernel<false><<<2, kThreads>>>(dx.get(), wrong.get());
  const std::vector<float> got = right.Read(), bad = wrong.Read();
  int poisoned = 0;
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < kThreads; ++t) {
      const size_t i = static_cast<size_t>(b * kThreads + t);
      EXPECT_EQ(got[i], x[static_cast<size_t>(b * kThreads + (t + kThreads - 1) % kThreads)]);
      poisoned += std::isnan(bad[i]);
    }
  }
  EXPECT_GE(poisoned, kThreads - 1) << "the backward block reads its neighbours before they write";
}

// --- Async copies into shared memory: without the wait (or without the barrier after it). ---

enum class CopySync { kWaitAndBarrier, kNoWait, kWaitNoBarrier };

template <CopySync kSync>
__global__ void StagedReverseKernel(const float* x, float* out) {
  __shared__ float tile[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  __pipeline_memcpy_async(&tile[t], x + blockIdx.x * kThreads + t, sizeof(float));
  __pipeline_commit();
  if (kSync != CopySync::kNoWait) __pipeline_wait_prior(0);
  if (kSync != CopySync::kWaitNoBarrier) __syncthreads();
  out[blockIdx.x * kThreads + t] = tile[kThreads - 1 - t];
}

TEST(CudaHostEmulatorTest, AMissingAsyncCopyWaitReadsPoison) {
  const std::vector<float> x = Ramp(2 * kThreads);
  const DeviceArray<float> dx(x);
  const DeviceArray<float> right(x.size()), no_wait(x.size()), no_barrier(x.size());
  StagedReverseKernel<CopySync::kWaitAndBarrier><<<2, kThreads>>>(dx.get(), right.get());
  StagedReverseKernel<CopySync::kNoWait><<<2, kThreads>>>(dx.get(), no_wait.get());
  StagedReverseKernel<CopySync::kWaitNoBarrier><<<2, kThreads>>>(dx.get(), no_barrier.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = right.Read();
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(got[static_cast<size_t>(b * kThreads + t)],
                x[static_cast<size_t>(b * kThreads + kThreads - 1 - t)]);
    }
  }
  for (float v : no_wait.Read()) EXPECT_TRUE(std::isnan(v)) << "read before the copy landed";
  int poisoned = 0;
  for (float v : no_barrier.Read()) poisoned += std::isnan(v);
  EXPECT_GE(poisoned, kThreads) << "other threads' copies land at their own waits";
}

// Zero-fill: the tail of a copy past the valid source bytes is zeros once it landed.
__global__ void ZeroFillKernel(const float* x, float* out) {
  __shared__ float4 tile[1];
  if (threadIdx.x == 0) {
    __pipeline_memcpy_async(&tile[0], x, 16, 8);  // two floats copied, two zeroed
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[0] = tile[0].x;
    out[1] = tile[0].y;
    out[2] = tile[0].z;
    out[3] = tile[0].w;
  }
}

TEST(CudaHostEmulatorTest, AsyncCopiesZeroFillTheirTail) {
  const DeviceArray<float> dx(std::vector<float>{1.5f, -2.0f, 7.0f, 9.0f});
  const DeviceArray<float> out(4);
  ZeroFillKernel<<<1, 32>>>(dx.get(), out.get());
  EXPECT_EQ(out.Read(), (std::vector<float>{1.5f, -2.0f, 0.0f, 0.0f}));
}

// --- A tail: a grid that forgets the last partial block of elements. ---

__global__ void ScaleKernel(const float* x, float* y, float a, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

// y = a x over n elements; `round_up` false is the bug: n / kThreads blocks.
void Scale(const float* x, float* y, float a, int64_t n, bool round_up) {
  const int64_t blocks = round_up ? (n + kThreads - 1) / kThreads : n / kThreads;
  ScaleKernel<<<static_cast<unsigned>(blocks), kThreads>>>(x, y, a, n);
}

TEST(CudaHostEmulatorTest, ASkippedTailLeavesPoisonAndTheRoundedUpGridCoversIt) {
  const int n = 3 * kThreads + 17;
  const std::vector<float> x = Ramp(n);
  const DeviceArray<float> dx(x);
  const DeviceArray<float> right(static_cast<size_t>(n)), wrong(static_cast<size_t>(n));
  Scale(dx.get(), right.get(), 0.5f, n, /*round_up=*/true);
  Scale(dx.get(), wrong.get(), 0.5f, n, /*round_up=*/false);
  const std::vector<float> got = right.Read(), bad = wrong.Read();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], 0.5f * x[static_cast<size_t>(i)]);
  for (int i = 3 * kThreads; i < n; ++i) EXPECT_TRUE(std::isnan(bad[static_cast<size_t>(i)])) << i;
}

// A row loop that stops at the last whole stride (a tail inside a block).
template <bool kWholeRow>
__global__ void RowCopyKernel(const float* x, float* y, int64_t d) {
  const int64_t end = kWholeRow ? d : d - d % blockDim.x;
  for (int64_t j = threadIdx.x; j < end; j += blockDim.x)
    y[blockIdx.x * d + j] = x[blockIdx.x * d + j];
}

TEST(CudaHostEmulatorTest, ALoopThatDropsItsLastPartialStrideIsCaught) {
  const int64_t rows = 3, d = 300;
  const std::vector<float> x = Ramp(static_cast<int>(rows * d));
  const DeviceArray<float> dx(x);
  const DeviceArray<float> right(x.size()), wrong(x.size());
  RowCopyKernel<true><<<rows, 128>>>(dx.get(), right.get(), d);
  RowCopyKernel<false><<<rows, 128>>>(dx.get(), wrong.get(), d);
  EXPECT_EQ(right.Read(), x);
  const std::vector<float> bad = wrong.Read();
  EXPECT_TRUE(std::isnan(bad[static_cast<size_t>(d - 1)]));
  EXPECT_EQ(bad[0], x[0]);
}

// --- Warps. ---

// Lane sums by xor butterfly; a second result reads lane 31 after it ended (poison).
__global__ void WarpSumKernel(const float* x, float* sums, float* from_ended) {
  const int lane = static_cast<int>(threadIdx.x) % warpSize;
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  sums[threadIdx.x] = v;
  if (lane == 31) return;
  from_ended[threadIdx.x] = __shfl_sync(0x7fffffffu, v, 31);
}

TEST(CudaHostEmulatorTest, ShufflesExchangeWithinAWarpAndAnEndedLaneGivesPoison) {
  const std::vector<float> x = Ramp(64);
  const DeviceArray<float> dx(x);
  const DeviceArray<float> sums(64), from_ended(64);
  WarpSumKernel<<<1, 64>>>(dx.get(), sums.get(), from_ended.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = sums.Read(), ended = from_ended.Read();
  for (int w = 0; w < 2; ++w) {
    const std::vector<float> warp(x.begin() + 32 * w, x.begin() + 32 * (w + 1));
    for (int l = 0; l < 32; ++l) EXPECT_EQ(got[static_cast<size_t>(32 * w + l)], Sum(warp));
    for (int l = 0; l < 31; ++l) EXPECT_TRUE(std::isnan(ended[static_cast<size_t>(32 * w + l)]));
  }
}

// Down-shifts with width 8: lanes past their segment keep their own value.
__global__ void SegmentShiftKernel(int* out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 3, 8);
}

TEST(CudaHostEmulatorTest, ShuffleWidthsSplitTheWarpIntoSegments) {
  const DeviceArray<int> out(32);
  SegmentShiftKernel<<<1, 32>>>(out.get());
  const std::vector<int> got = out.Read();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(got[static_cast<size_t>(lane)], lane % 8 < 5 ? lane + 3 : lane) << lane;
  }
}

// Lane 0 waits at the block barrier while the rest of its warp waits for it in a shuffle.
__global__ void DeadlockKernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    v = __shfl_sync(0xffffffffu, v, 0);
  }
  out[threadIdx.x] = v;
}

TEST(CudaHostEmulatorTest, ADeadlockFailsTheNextSynchronizationOnce) {
  const DeviceArray<float> out(32);
  DeadlockKernel<<<1, 32>>>(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the launch itself was valid";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// --- Launch configuration errors: recorded for cudaGetLastError, nothing runs. ---

__global__ void FillKernel(float* out, float v) { out[threadIdx.x] = v; }

TEST(CudaHostEmulatorTest, InvalidLaunchesRunNothingAndSetTheLastError) {
  const DeviceArray<float> out(2048);
  FillKernel<<<1, 1025>>>(out.get(), 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cleared by reading it";
  FillKernel<<<0, 32>>>(out.get(), 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_TRUE(std::isnan(out.Read()[0]));
  FillKernel<<<1, 1024>>>(out.get(), 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Read()[1023], 1.0f);
}

__global__ void DynamicSharedKernel(float* out, int n) {
  extern __shared__ float dynamic[];
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    dynamic[i] = static_cast<float>(i);
  }
  __syncthreads();
  if (threadIdx.x == 0) out[0] = dynamic[n - 1];
}

TEST(CudaHostEmulatorTest, DynamicSharedMemoryPast48KiBNeedsTheAttribute) {
  const DeviceArray<float> out(1);
  const int n = 64 * 1024 / 4;
  DynamicSharedKernel<<<1, 128, n * sizeof(float)>>>(out.get(), n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(DynamicSharedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 200 * 1024),
            cudaErrorInvalidValue)
      << "past what an sm_86 block may have";
  cudaGetLastError();
  ASSERT_EQ(cudaFuncSetAttribute(DynamicSharedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 n * static_cast<int>(sizeof(float))),
            cudaSuccess);
  DynamicSharedKernel<<<1, 128, n * sizeof(float)>>>(out.get(), n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Read()[0], static_cast<float>(n - 1));
}

// 2-D blocks and grids: the built-in indices.
__global__ void IndexKernel(int* out) {
  const int block = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
  const int thread = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  out[block * static_cast<int>(blockDim.x * blockDim.y) + thread] = 1000 * block + thread;
}

TEST(CudaHostEmulatorTest, BuiltInIndicesFollowTheLaunchShape) {
  const DeviceArray<int> out(6 * 12);
  IndexKernel<<<dim3(3, 2), dim3(4, 3)>>>(out.get());
  const std::vector<int> got = out.Read();
  for (int b = 0; b < 6; ++b) {
    for (int t = 0; t < 12; ++t) EXPECT_EQ(got[static_cast<size_t>(b * 12 + t)], 1000 * b + t);
  }
}

TEST(CudaHostEmulatorTest, CopiesCheckTheirDeviceSide) {
  float host[4] = {0, 0, 0, 0};
  const DeviceArray<float> small(2);
  EXPECT_EQ(cudaMemcpy(small.get(), host, sizeof(host), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue)
      << "4 floats into an allocation of 2";
  EXPECT_EQ(cudaMemcpy(host, host + 2, 2 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue)
      << "a host pointer as the device side";
  cudaGetLastError();
  EXPECT_EQ(cudaFree(host), cudaErrorInvalidValue);
  cudaGetLastError();
}

}  // namespace
}  // namespace ripplekv::cuda_host
