#pragma once
// An estimate of the memory one calibration process (`ripplekv calibrate`, or a worker running one
// task at a time) needs at its peak, from the model's shape and the job's parameters alone, so a
// worker can refuse a job that would not fit instead of being killed by the kernel's OOM killer,
// and `ripplekv info` can report it without loading anything (docs/MEMORY.md).
//
// Every term is derived from what the code allocates (fp32 everywhere, 4 bytes per value):
//   weights           the model's weights in memory: WeightBytes(model), or the same sum computed
//                     from the file's tensor table (ModelSummary::weight_bytes()).
//   thread scratch    LinearStored's per-thread fp32 slice of 128 rows x K columns
//                     (kernels/ops/cpu/linear_cpu.cc): threads * 128 * max K * 4, with
//                     max K = max(d_model, d_ff, n_heads * head_dim); 0 with --weights f32.
//   KV cache          the clean prefill's KvCache of C + W tokens (worker/engine/kv_cache.h):
//                     L * H_kv * (C + W) * (2 * head_dim * 4 + 4) (keys, values, int32 positions).
//   calibration       what SampleCalibrator holds and allocates beyond the KV cache
//                     (memory_estimate.cc spells out each buffer).
//   load              with --weights f32 only: the file's stored weights, mapped and read while
//                     they are expanded at load (the mapping is released after loading, so the
//                     load's peak is weights + this, and no task runs yet).
//   tokenizer         kTokenizerBytesPerToken * vocab_size: the tokenizer and the GGUF metadata
//                     it is read from (measured, not derived).
//   process           kProcessBytes: code, libraries, OpenBLAS and OpenMP buffers, glibc arenas,
//                     the built-in calibration corpus (measured, not derived).
// Total = weights + thread scratch + tokenizer + process + max(KV cache + calibration, load).
// The estimate is for one sample being calibrated; a worker's prepared-sample cache comes on top
// and is bounded separately (its budget is what remains under the limit).
// Pure functions; thread-safe.

#include <algorithm>
#include <cstdint>
#include <string>

#include "method/profile.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

// The process's own resident memory beyond everything the model and the job account for: code
// and shared libraries, OpenBLAS's and OpenMP's thread buffers, glibc arenas, the built-in
// calibration corpus and the calibration set. Measured as the peak RSS (VmHWM) of
// `ripplekv calibrate --threads 1 --samples 1 --layers 0 --trials 2 --context-len 512 --probe 32`
// on a 1-layer, 1024-token synthetic smollm2-135m (q4_0) minus the other terms of its estimate:
// 20.1 MiB, rounded up (docs/MEMORY.md). Bytes.
inline constexpr int64_t kProcessBytes = int64_t{22} << 20;

// The tokenizer and the GGUF metadata it is parsed from, per vocabulary entry: the peak RSS of
// `ripplekv info` (header and tokenizer only) on SmolLM2-135M (49152 tokens, 48900 merges) minus
// that on the 1024-token synthetic model, over the 48128 extra tokens: 420 bytes, rounded up.
inline constexpr int64_t kTokenizerBytesPerToken = 512;

// Rows of W expanded per thread by LinearStored (kernels/ops/cpu/linear_cpu.cc kColumnSlice).
inline constexpr int64_t kLinearSliceRows = 128;

struct MemoryOptions {
  int threads = 1;        // CPU threads (each holds its own slice buffer), >= 1
  int context_len = 512;  // C, tokens
  int probe_len = 32;     // W, tokens
  int trials = 2;         // T, trials per (sample, layer), batched as T * W rows in cache mode
  WeightStorage weights = WeightStorage::kStored;
  method::PerturbMode mode = method::PerturbMode::kCache;
  // With WeightStorage::kF32: the file's stored weight bytes (ModelSummary::stored_weight_bytes),
  // mapped and read while the weights are expanded at load. Ignored with kStored.
  int64_t f32_load_mapped_bytes = 0;
};

// Bytes, each term as documented at the top of this file.
struct MemoryEstimate {
  int64_t weight_bytes = 0;              // weights in memory
  int64_t scratch_per_thread_bytes = 0;  // one thread's slice buffer (0 for f32 weights)
  int64_t thread_scratch_bytes = 0;      // threads * scratch_per_thread_bytes
  int64_t kv_cache_bytes = 0;            // the clean prefill's KV cache of C + W tokens
  int64_t calibration_bytes = 0;         // one task's calibration scratch beyond the KV cache
  int64_t load_bytes = 0;                // f32 only: the file mapped while expanding at load
  int64_t tokenizer_bytes = 0;           // kTokenizerBytesPerToken * vocab_size
  int64_t process_bytes = kProcessBytes;

  // weights + thread scratch + tokenizer + process + max(KV cache + calibration, load).
  int64_t total_bytes() const {
    return weight_bytes + thread_scratch_bytes + tokenizer_bytes + process_bytes +
           std::max(task_bytes(), load_bytes);
  }
  // One task's memory beyond the resident model: KV cache + calibration scratch.
  int64_t task_bytes() const { return kv_cache_bytes + calibration_bytes; }
};

// The estimate for `config` whose weights take `weight_bytes` in memory (WeightBytes(model) for a
// loaded model, ModelSummary::weight_bytes(storage) for a file). Non-positive shape values or
// options count as 0 (threads as 1); never negative.
MemoryEstimate EstimateCalibrationMemory(const ModelConfig& config, int64_t weight_bytes,
                                         const MemoryOptions& options);

// The KV cache of `tokens` tokens: L * H_kv * tokens * (2 * head_dim * 4 + 4) bytes.
int64_t KvCacheBytes(const ModelConfig& config, int64_t tokens);

// "31.2 GiB", "812.0 MiB", "4.0 KiB", "12 B": binary units, one decimal.
std::string FormatBytes(int64_t bytes);

// One line naming the estimate's terms, e.g. "31.2 GiB (weights 4.2 GiB, thread scratch 8.0 MiB,
// KV cache 1.1 GiB, calibration scratch 2.3 GiB, tokenizer 62.5 MiB, process 22.0 MiB)"; a
// non-zero load term is named too.
std::string DescribeEstimate(const MemoryEstimate& estimate);

}  // namespace ripplekv::worker
