#pragma once
// Run-time x86 feature checks for the AVX2 kernels of this folder (internal). CPUID is read
// directly: compilers disagree on the names __builtin_cpu_supports accepts (clang 14 has no
// "f16c"). Thread-safe; include only in x86 builds.

#include <cpuid.h>

namespace ripplekv::kernels::cpu {

// Whether this CPU has AVX2, FMA and F16C and the OS saves the YMM registers (OSXSAVE + XCR0),
// read from the CPU on every call. CPUID traps to the hypervisor in a virtual machine (tens of
// microseconds): call CpuHasAvx2FmaF16c(), which asks once per process.
inline bool QueryCpuHasAvx2FmaF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  if ((xcr0 & 0x6u) != 0x6u) return false;  // SSE and AVX state enabled by the OS
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 5)) != 0;  // AVX2
}

// QueryCpuHasAvx2FmaF16c(), asked once per process (kernels call this per block row).
inline bool CpuHasAvx2FmaF16c() {
  static const bool has = QueryCpuHasAvx2FmaF16c();
  return has;
}

}  // namespace ripplekv::kernels::cpu
