#include "tests/cuda_host/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if !defined(__x86_64__)
#error "tests/cuda_host fibers switch stacks with x86-64 assembly"
#endif

// ripplekv_cuda_host_switch(void** save_sp, void* load_sp): pushes the System V callee-saved
// registers, stores the stack pointer in *save_sp, loads load_sp and pops the registers saved
// there. A new fiber's stack is laid out as if it had been switched away from right before
// ripplekv_cuda_host_start, which calls r13(r12) and never returns (MakeFiber). The floating-point
// control words are not switched: every fiber of an OS thread shares them.
asm(R"(
  .text
  .globl ripplekv_cuda_host_switch
  .type ripplekv_cuda_host_switch, @function
ripplekv_cuda_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ripplekv_cuda_host_switch, .-ripplekv_cuda_host_switch

  .globl ripplekv_cuda_host_start
  .type ripplekv_cuda_host_start, @function
ripplekv_cuda_host_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size ripplekv_cuda_host_start, .-ripplekv_cuda_host_start
)");

extern "C" void ripplekv_cuda_host_switch(void** save_sp, void* load_sp);
extern "C" void ripplekv_cuda_host_start();

namespace ripplekv::cuda_host {

void SwitchFiber(FiberContext* from, FiberContext* to) {
  ripplekv_cuda_host_switch(&from->sp, to->sp);
}

void MakeFiber(FiberContext* ctx, void* stack, size_t bytes, void (*entry)(void*), void* arg) {
  auto top = reinterpret_cast<uintptr_t>(stack) + bytes;
  top &= ~uintptr_t{15};
  // Seven words below the top: r15, r14, r13 (entry), r12 (arg), rbx, rbp, then the return
  // address; after `ret` the stack pointer is `top`, 16-byte aligned as a call site requires.
  auto* words = reinterpret_cast<uintptr_t*>(top - 7 * sizeof(uintptr_t));
  words[0] = 0;
  words[1] = 0;
  words[2] = reinterpret_cast<uintptr_t>(entry);
  words[3] = reinterpret_cast<uintptr_t>(arg);
  words[4] = 0;
  words[5] = 0;
  words[6] = reinterpret_cast<uintptr_t>(&ripplekv_cuda_host_start);
  ctx->sp = words;
}

namespace {
size_t PageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
}  // namespace

FiberStacks::FiberStacks(int count) {
  const size_t slot = kStackBytes + PageBytes();
  bytes_ = slot * static_cast<size_t>(count);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cuda_host: fiber stacks");
    std::abort();
  }
  base_ = static_cast<char*>(p);
  for (int i = 0; i < count; ++i) {
    if (mprotect(base_ + slot * static_cast<size_t>(i), PageBytes(), PROT_NONE) != 0) {
      std::perror("cuda_host: fiber stack guard");
      std::abort();
    }
  }
}

FiberStacks::~FiberStacks() { munmap(base_, bytes_); }

void* FiberStacks::Stack(int i) const {
  return base_ + (kStackBytes + PageBytes()) * static_cast<size_t>(i) + PageBytes();
}

}  // namespace ripplekv::cuda_host
