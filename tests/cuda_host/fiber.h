#pragma once
// User-space threads ("fibers") for the host emulation of CUDA (tests/cuda_host): the threads of
// one emulated thread block run as fibers on one OS thread, switching only where CUDA threads
// wait for each other (barriers, warp operations). x86-64 only (the switch is a few lines of
// assembly: ucontext's swapcontext makes a system call per switch, which dominates a kernel with
// barriers in its loops).

#include <cstddef>
#include <memory>

namespace ripplekv::cuda_host {

// A suspended fiber (or the OS thread's own context while fibers run): its saved stack pointer.
struct FiberContext {
  void* sp = nullptr;
};

// Saves the running context into *from and resumes `to`; returns when something switches back to
// *from. Not thread-safe per context (a context runs on one OS thread at a time).
void SwitchFiber(FiberContext* from, FiberContext* to);

// Prepares *ctx so that switching to it calls entry(arg) on the stack [stack, stack + bytes)
// (16-byte aligned top). `entry` must never return: it ends by switching away for good.
void MakeFiber(FiberContext* ctx, void* stack, size_t bytes, void (*entry)(void*), void* arg);

// `count` fiber stacks of kStackBytes each, each above a guard page (an overflow faults instead
// of corrupting its neighbour). Memory is reserved, not committed: a stack costs the pages its
// fiber touches. Owned by one OS thread.
class FiberStacks {
 public:
  static constexpr size_t kStackBytes = 64 * 1024;
  explicit FiberStacks(int count);
  ~FiberStacks();
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  // The lowest address of stack i (< count); the stack grows down from Stack(i) + kStackBytes.
  void* Stack(int i) const;

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ripplekv::cuda_host
