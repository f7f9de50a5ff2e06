#include "tests/cuda_host/emulator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/cuda_host/fiber.h"
#include "tests/cuda_host/runtime_state.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace ripplekv::cuda_host {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kWarp = 32;
constexpr size_t kDefaultDynamicShared = 48 * 1024;
constexpr size_t kMaxStaticShared = 48 * 1024;
constexpr unsigned char kPoisonByte = 0xFF;
constexpr uint64_t kPoisonBits = ~uint64_t{0};

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string Dim(const uint3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

// Dynamic shared memory limits set with cudaFuncSetAttribute, by kernel.
struct KernelLimits {
  std::mutex mutex;
  std::map<const void*, size_t> max_dynamic_shared;
};
KernelLimits& Limits() {
  static KernelLimits* limits = new KernelLimits();  // never destroyed: used until exit
  return *limits;
}

size_t MaxDynamicShared(const void* kernel) {
  KernelLimits& limits = Limits();
  std::lock_guard<std::mutex> lock(limits.mutex);
  auto it = limits.max_dynamic_shared.find(kernel);
  return it == limits.max_dynamic_shared.end() ? kDefaultDynamicShared : it->second;
}

enum class Wait { kRunnable, kBlockBarrier, kWarpBarrier, kDone };

struct PendingCopy {
  char* dst;
  const char* src;
  uint32_t bytes, zfill;
  uint64_t batch;  // the commit that closes it: the thread's commit count when it was issued
};

struct Thread {
  FiberContext context;
  uint3 idx{};
  int lane = 0, warp = 0;
  Wait wait = Wait::kRunnable;
  std::vector<PendingCopy> copies;
  uint64_t commits = 0;
};

// A warp's barrier and shuffle exchange. Values of generation g are in slots[g % 2]: a lane can
// run at most one exchange ahead of the slowest (the next one needs every lane), so two buffers
// keep a round's values until every lane has read them.
struct WarpState {
  unsigned live = 0;  // lanes that exist and have not ended
  unsigned mask = 0;  // the mask of the exchange in progress
  int arrived = 0;
  uint64_t generation = 0;
  unsigned supplied[2] = {0, 0};
  uint64_t slots[2][kWarp] = {};
};

// Runs launches on one OS thread (one per thread that launches).
class Executor {
 public:
  Executor() : stacks_(kMaxThreadsPerBlock), threads_(kMaxThreadsPerBlock) {
    shared_.reset(static_cast<char*>(std::aligned_alloc(256, kMaxSharedBytes)));
  }

  bool running() const { return running_; }

  void Run(const LaunchConfig& config, void (*body)(void*), void* closure) {
    running_ = true;
    config_ = &config;
    body_ = body;
    closure_ = closure;
    gridDim = config.grid;
    blockDim = config.block;
    uint64_t block_number = 0;
    for (unsigned z = 0; z < config.grid.z && !faulted_; ++z) {
      for (unsigned y = 0; y < config.grid.y && !faulted_; ++y) {
        for (unsigned x = 0; x < config.grid.x && !faulted_; ++x) {
          blockIdx = uint3{x, y, z};
          RunBlock(block_number++);
        }
      }
    }
    if (faulted_) ReportKernelFault(fault_);
    faulted_ = false;
    fault_.clear();
    running_ = false;
  }

  // --- Called by the running thread (a fiber of the current block). ---

  void SyncThreads() {
    Thread& t = Current();
    if (++block_arrived_ == live_) {
      ReleaseBlockBarrier();
      return;
    }
    t.wait = Wait::kBlockBarrier;
    Yield(t);
  }

  uint64_t Exchange(unsigned mask, uint64_t bits, int src_lane) {
    Thread& t = Current();
    WarpState& w = warps_[static_cast<size_t>(t.warp)];
    const unsigned me = 1u << t.lane;
    if ((mask & me) == 0) Fault("a warp operation whose mask leaves out the calling lane");
    if (w.arrived == 0) {
      w.mask = mask;
    } else if (w.mask != mask) {
      Fault("lanes of one warp meet at warp operations with different masks");
    }
    const int parity = static_cast<int>(w.generation & 1);
    w.slots[parity][t.lane] = bits;
    w.supplied[parity] |= me;
    ++w.arrived;
    if (!MaybeReleaseWarp(w)) {
      t.wait = Wait::kWarpBarrier;
      Yield(t);
    }
    if (src_lane < 0 || ((w.supplied[parity] >> src_lane) & 1u) == 0) return kPoisonBits;
    return w.slots[parity][src_lane];
  }

  int Lane() { return Current().lane; }

  void* Static(int site, size_t bytes, size_t align) {
    for (const auto& [s, offset] : static_sites_) {
      if (s == site) return shared_.get() + offset;
    }
    const size_t offset = RoundUp(static_end_, std::max<size_t>(align, 16));
    static_bytes_ += bytes;
    if (static_bytes_ > kMaxStaticShared || offset + bytes > kMaxSharedBytes) {
      Fault("static shared memory: " + std::to_string(static_bytes_) + " bytes (and " +
            std::to_string(config_->shared_bytes) + " dynamic) exceed the block's " +
            std::to_string(kMaxStaticShared) + " static / " + std::to_string(kMaxSharedBytes) +
            " total");
    }
    std::memset(shared_.get() + offset, kPoisonByte, bytes);
    static_sites_.emplace_back(site, offset);
    static_end_ = offset + bytes;
    return shared_.get() + offset;
  }

  void* Dynamic() { return shared_.get(); }

  void Copy(void* dst, const void* src, size_t size, size_t zfill) {
    Thread& t = Current();
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    const auto base = reinterpret_cast<uintptr_t>(shared_.get());
    if (size != 4 && size != 8 && size != 16) {
      Fault("__pipeline_memcpy_async of " + std::to_string(size) + " bytes (4, 8 or 16)");
    }
    if (zfill > size) Fault("__pipeline_memcpy_async: zfill larger than the copy");
    if (d % size != 0 || s % size != 0) {
      Fault("__pipeline_memcpy_async: source or destination not aligned to the copy size " +
            std::to_string(size));
    }
    if (d < base || d + size > base + kMaxSharedBytes) {
      Fault("__pipeline_memcpy_async: the destination is not shared memory");
    }
    if (size > zfill && !IsDeviceMemory(src, size - zfill)) {
      Fault("__pipeline_memcpy_async: the source is not device memory");
    }
    std::memset(dst, kPoisonByte, size);
    t.copies.push_back(PendingCopy{static_cast<char*>(dst), static_cast<const char*>(src),
                                   static_cast<uint32_t>(size), static_cast<uint32_t>(zfill),
                                   t.commits});
  }

  void Commit() { ++Current().commits; }

  void WaitPrior(size_t prior) {
    Thread& t = Current();
    if (t.commits < prior) return;
    const uint64_t done_below = t.commits - prior;  // batches [0, done_below) must be complete
    size_t kept = 0;
    for (const PendingCopy& c : t.copies) {
      if (c.batch < done_below) {
        std::memcpy(c.dst, c.src, c.bytes - c.zfill);
        std::memset(c.dst + (c.bytes - c.zfill), 0, c.zfill);
      } else {
        t.copies[kept++] = c;
      }
    }
    t.copies.resize(kept);
  }

  // Ends the launch with `what` (from the running thread); never returns to it.
  [[noreturn]] void Fault(const std::string& what) {
    Thread& t = Current();
    if (!faulted_) {
      faulted_ = true;
      fault_ = Where() + ", block " + Dim(blockIdx) + ", thread " + Dim(t.idx) + ": " + what;
    }
    t.wait = Wait::kDone;
    SwitchFiber(&t.context, &scheduler_);
    std::abort();  // never resumed
  }

 private:
  Thread& Current() { return threads_[static_cast<size_t>(current_)]; }

  std::string Where() const {
    return std::string(config_->where.file_name()) + ":" + std::to_string(config_->where.line());
  }

  static void ThreadMain(void* arg) {
    auto* self = static_cast<Executor*>(arg);
    self->body_(self->closure_);
    self->Exit();
  }

  void Exit() {
    Thread& t = Current();
    t.wait = Wait::kDone;
    --live_;
    WarpState& w = warps_[static_cast<size_t>(t.warp)];
    w.live &= ~(1u << t.lane);
    if (block_arrived_ > 0 && block_arrived_ == live_) ReleaseBlockBarrier();
    if (w.arrived > 0) MaybeReleaseWarp(w);
    SwitchFiber(&t.context, &scheduler_);
    std::abort();  // never resumed
  }

  void Yield(Thread& t) { SwitchFiber(&t.context, &scheduler_); }

  void ReleaseBlockBarrier() {
    block_arrived_ = 0;
    for (int i = 0; i < block_threads_; ++i) {
      Thread& t = threads_[static_cast<size_t>(i)];
      if (t.wait == Wait::kBlockBarrier) t.wait = Wait::kRunnable;
    }
  }

  // Releases w's exchange when every live lane of its mask arrived; whether it did.
  bool MaybeReleaseWarp(WarpState& w) {
    if (w.arrived < std::popcount(w.mask & w.live)) return false;
    const int first = static_cast<int>(&w - warps_.data()) * kWarp;
    for (int i = first; i < std::min(first + kWarp, block_threads_); ++i) {
      Thread& t = threads_[static_cast<size_t>(i)];
      if (t.wait == Wait::kWarpBarrier) t.wait = Wait::kRunnable;
    }
    w.arrived = 0;
    ++w.generation;
    w.supplied[w.generation & 1] = 0;
    return true;
  }

  void RunBlock(uint64_t block_number) {
    const dim3& b = config_->block;
    block_threads_ = static_cast<int>(b.x * b.y * b.z);
    live_ = block_threads_;
    block_arrived_ = 0;
    std::memset(shared_.get(), kPoisonByte, config_->shared_bytes);
    static_sites_.clear();
    static_end_ = RoundUp(config_->shared_bytes, 16);
    static_bytes_ = 0;
    const int n_warps = (block_threads_ + kWarp - 1) / kWarp;
    warps_.assign(static_cast<size_t>(n_warps), WarpState{});
    for (int i = 0; i < block_threads_; ++i) {
      Thread& t = threads_[static_cast<size_t>(i)];
      const auto u = static_cast<unsigned>(i);
      t.idx = uint3{u % b.x, u / b.x % b.y, u / (b.x * b.y)};
      t.lane = i % kWarp;
      t.warp = i / kWarp;
      t.wait = Wait::kRunnable;
      t.copies.clear();
      t.commits = 0;
      warps_[static_cast<size_t>(t.warp)].live |= 1u << t.lane;
      MakeFiber(&t.context, stacks_.Stack(i), FiberStacks::kStackBytes, &Executor::ThreadMain,
                this);
    }
    for (uint64_t pass = block_number; live_ > 0 && !faulted_; ++pass) {
      bool ran = false;
      const bool forward = pass % 2 == 0;
      for (int k = 0; k < block_threads_ && !faulted_; ++k) {
        const int i = forward ? k : block_threads_ - 1 - k;
        Thread& t = threads_[static_cast<size_t>(i)];
        if (t.wait != Wait::kRunnable) continue;
        current_ = i;
        threadIdx = t.idx;
        ran = true;
        SwitchFiber(&scheduler_, &t.context);
      }
      if (!ran && !faulted_) Deadlock();
    }
  }

  void Deadlock() {
    int at_block = 0, at_warp = 0;
    for (int i = 0; i < block_threads_; ++i) {
      const Wait w = threads_[static_cast<size_t>(i)].wait;
      at_block += w == Wait::kBlockBarrier;
      at_warp += w == Wait::kWarpBarrier;
    }
    faulted_ = true;
    fault_ = Where() + ", block " + Dim(blockIdx) + ": deadlock: " + std::to_string(at_block) +
             " threads wait at __syncthreads and " + std::to_string(at_warp) +
             " at warp operations, " + std::to_string(block_threads_ - live_) + " ended";
  }

  FiberStacks stacks_;
  std::vector<Thread> threads_;
  std::vector<WarpState> warps_;
  std::unique_ptr<char, decltype(&std::free)> shared_{nullptr, &std::free};
  FiberContext scheduler_;
  const LaunchConfig* config_ = nullptr;
  void (*body_)(void*) = nullptr;
  void* closure_ = nullptr;
  bool running_ = false;
  int current_ = 0;
  int block_threads_ = 0;
  int live_ = 0;
  int block_arrived_ = 0;
  std::vector<std::pair<int, size_t>> static_sites_;
  size_t static_end_ = 0;
  size_t static_bytes_ = 0;
  bool faulted_ = false;
  std::string fault_;
};

// The calling OS thread's executor, made on its first launch.
Executor& ThisThreadsExecutor() {
  thread_local std::unique_ptr<Executor> executor = std::make_unique<Executor>();
  return *executor;
}

// The executor of the running kernel; aborts outside one (device code called from the host).
Executor& Running(const char* what) {
  Executor& e = ThisThreadsExecutor();
  if (!e.running()) {
    std::fprintf(stderr, "cuda_host: %s called outside a kernel\n", what);
    std::abort();
  }
  return e;
}

cudaError_t CheckConfig(const void* kernel, const LaunchConfig& c) {
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  const bool block_ok = threads >= 1 && threads <= kMaxThreadsPerBlock && c.block.x <= 1024 &&
                        c.block.y <= 1024 && c.block.z <= 64;
  const bool grid_ok = c.grid.x >= 1 && c.grid.y >= 1 && c.grid.z >= 1 && c.grid.x <= 0x7fffffffu &&
                       c.grid.y <= 65535 && c.grid.z <= 65535;
  if (!block_ok || !grid_ok) return cudaErrorInvalidConfiguration;
  if (c.shared_bytes > MaxDynamicShared(kernel)) return cudaErrorInvalidValue;
  if (!IsLiveStream(c.stream)) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

}  // namespace

cudaError_t Launch(const void* kernel, const LaunchConfig& config, void (*body)(void*),
                   void* closure) {
  Executor& executor = ThisThreadsExecutor();
  if (executor.running()) {
    std::fprintf(stderr, "cuda_host: a kernel launched a kernel (dynamic parallelism)\n");
    std::abort();
  }
  if (const cudaError_t e = CheckConfig(kernel, config); e != cudaSuccess) return Fail(e);
  executor.Run(config, body, closure);
  return cudaSuccess;
}

bool SetMaxDynamicShared(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxSharedBytes) return false;
  KernelLimits& limits = Limits();
  std::lock_guard<std::mutex> lock(limits.mutex);
  limits.max_dynamic_shared[kernel] = static_cast<size_t>(bytes);
  return true;
}

void SyncThreads() { Running("__syncthreads").SyncThreads(); }

void SyncWarp(unsigned mask) { Running("__syncwarp").Exchange(mask, 0, -1); }

uint64_t ShuffleBits(unsigned mask, uint64_t bits, ShuffleMode mode, int operand, int width) {
  Executor& e = Running("__shfl_sync");
  if (width < 1 || width > kWarp || !std::has_single_bit(static_cast<unsigned>(width))) {
    e.Fault("a shuffle of width " + std::to_string(width) + " (a power of two <= 32)");
  }
  const int lane = e.Lane();
  const int segment = lane & ~(width - 1);
  int src = lane;
  switch (mode) {
    case ShuffleMode::kIndex:
      src = segment + (operand & (width - 1));
      break;
    case ShuffleMode::kUp:
      src = lane - operand >= segment ? lane - operand : lane;
      break;
    case ShuffleMode::kDown:
      src = lane + operand < segment + width ? lane + operand : lane;
      break;
    case ShuffleMode::kXor:
      src = (lane ^ operand) < segment + width ? lane ^ operand : lane;
      break;
  }
  return e.Exchange(mask, bits, src);
}

void* SharedStatic(int site, size_t bytes, size_t align) {
  return Running("__shared__").Static(site, bytes, align);
}

void* SharedDynamic() { return Running("extern __shared__").Dynamic(); }

void AsyncCopy(void* dst_shared, const void* src_global, size_t size_and_align, size_t zfill) {
  Running("__pipeline_memcpy_async").Copy(dst_shared, src_global, size_and_align, zfill);
}

void AsyncCommit() { Running("__pipeline_commit").Commit(); }

void AsyncWaitPrior(size_t prior) { Running("__pipeline_wait_prior").WaitPrior(prior); }

}  // namespace ripplekv::cuda_host
