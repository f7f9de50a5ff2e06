#pragma once
// OpenBLAS's threading for the CPU backends: BLAS runs single-threaded, set once, process wide;
// the backends parallelize over independent work items with OpenMP instead, so every output is
// computed by the same BLAS call whatever the thread count (OpenBLAS's own threading is not).

namespace ripplekv::kernels::cpu {

// Sets OpenBLAS to one thread, once per process. Every backend calling BLAS calls it first.
void UseSingleThreadedBlas();

}  // namespace ripplekv::kernels::cpu
