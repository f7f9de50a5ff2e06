#pragma once
// The async-copy primitives of cuda_pipeline_primitives.h for the host emulation
// (tests/cuda_host/emulator.h): a copy poisons its shared-memory destination at once and lands
// when its thread waits for its batch.

#include <cuda_runtime.h>

#include <cstddef>

// Queues a copy of size_and_align (4, 8 or 16) bytes, the last zfill of them zeros instead of
// source bytes, from global to shared memory; both addresses aligned to size_and_align.
inline void __pipeline_memcpy_async(void* __restrict dst_shared, const void* __restrict src_global,
                                    size_t size_and_align, size_t zfill = 0) {
  ripplekv::cuda_host::AsyncCopy(dst_shared, src_global, size_and_align, zfill);
}
// Closes the calling thread's current batch of copies.
inline void __pipeline_commit() { ripplekv::cuda_host::AsyncCommit(); }
// Waits until at most `prior` of the calling thread's committed batches are in flight.
inline void __pipeline_wait_prior(size_t prior) { ripplekv::cuda_host::AsyncWaitPrior(prior); }
