#pragma once
// The CUDA backend's entry points for the op front ends and devices.cc (internal: include only
// from kernels/ops/). Launchers take the op's context and device pointers the front ends checked;
// they make ctx.ordinal the calling thread's device, queue their kernels on ctx.stream and return
// (callers copy results back with the allocator, whose copies wait for the stream: sessions
// create blocking streams, devices.h).

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/tensor/allocator.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels::cuda {

// Aborts with the runtime's message when `error` (a cudaError_t) is not cudaSuccess: for the
// backend's internal calls that have no Status channel (allocators, synchronous copies).
void CheckCuda(int error, const char* what);

// Visible CUDA devices; 0 and the runtime's reason in *why when there are none.
int DeviceCount(std::string* why);
// The allocator of device `ordinal` (< DeviceCount), created on first use, alive for the process.
Allocator* DeviceAllocatorFor(int ordinal);

// A session's device resources (devices.h DeviceSession): a blocking stream on device `ordinal`,
// a cuBLAS handle bound to it (cuBLAS is loaded on first use, so processes that never open a
// device do not map it) and a workspace of `workspace_bytes`. Fills *ctx's device fields; returns
// false with the reason in *why when any of them cannot be had (nothing left allocated).
bool OpenSession(int ordinal, size_t workspace_bytes, OpContext* ctx, std::string* why);
// Waits for the stream, then frees what OpenSession made (ctx's device fields are cleared).
void CloseSession(OpContext* ctx);
// A stream-ordered allocator on ctx's device and stream (cudaMallocAsync / cudaFreeAsync from the
// device's memory pool, which keeps freed memory for reuse): allocating and freeing a temporary
// never waits for the device, and a block freed while kernels still read it stays valid until
// they ran. Copies to the host wait for the stream. Must be destroyed before the session closes.
Allocator* NewStreamAllocator(const OpContext& ctx);
// Free and total memory of device `ordinal` (cudaMemGetInfo); false with the reason in *why.
bool MemoryInfo(int ordinal, size_t* free_bytes, size_t* total_bytes, std::string* why);
// Waits for ctx.stream; false with the first asynchronous error's text in *why.
bool Synchronize(const OpContext& ctx, std::string* why);
// Makes ctx.ordinal the calling thread's device and returns ctx.stream (a cudaStream_t).
void* Activate(const OpContext& ctx);

// The ops of kernels/ops/*.h, same contracts, fp32 on the device; every pointer (int32 ones too)
// is device memory.
void RmsNorm(const OpContext& ctx, const float* x, const float* weight, float eps, float* y,
             int64_t m, int64_t d);
void SwiGlu(const OpContext& ctx, const float* gate, const float* up, float* out, int64_t n);
void AddTo(const OpContext& ctx, const float* x, float* y, int64_t n);
// RoPE with the table's frequencies (host memory, at most kMaxRopePairs: head_dim <= 512).
inline constexpr int64_t kMaxRopePairs = 256;
void ApplyRope(const OpContext& ctx, const float* inv_freq, int64_t pairs, bool interleaved,
               const int32_t* positions, float* x, int64_t m, int64_t n_heads, int64_t head_dim);
// KL per row of device logits, written to host memory (host_out: m floats); synchronous.
void KlDivergenceRows(const OpContext& ctx, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* host_out);
void GatherRows(const OpContext& ctx, const float* src, int64_t d, const int32_t* rows,
                int64_t n_rows, float* out);
void CopyRows(const OpContext& ctx, const float* src, int64_t d, int64_t first, int64_t n_rows,
              float* out);
// One cache layer's device memory (KvLayerRef's fields; this header stays free of Abseil, which
// nvcc does not compile).
struct CacheLayer {
  float* k;
  float* v;
  int32_t* positions;
  int n_kv_heads, capacity, length, head_dim;
};
// Causal attention over up to kMaxSegments cache segments (KvCacheView's fields), head_dim at
// most kMaxAttentionHeadDim.
inline constexpr int kMaxSegments = 8;
inline constexpr int64_t kMaxAttentionHeadDim = 256;
struct CacheSegment {
  const float* k;
  const float* v;
  const int32_t* positions;
  int n_kv_heads, capacity, length, head_dim;
};
void CausalAttention(const OpContext& ctx, const float* q, const int32_t* q_positions, int64_t m,
                     int64_t n_heads, int64_t head_dim, const CacheSegment* segments,
                     int n_segments, float scale, float* out);
void KvAppend(const OpContext& ctx, const float* k_rows, const float* v_rows,
              const int32_t* positions, int64_t n, const CacheLayer& layer);
void KvRetain(const OpContext& ctx, const int32_t* keep, int count, const CacheLayer& layer);

// y [m, n] (fp32) = x [m, k] (fp32) * w [n, k]^T (+ y when accumulate) + bias [n] (fp32, or null),
// through cuBLAS on ctx.blas. With bf16 weights (w_bf16) x is rounded to bf16 (in the stream's
// memory pool) and the GEMM accumulates in fp32; with fp32 weights the GEMM is pedantic fp32 (no
// TF32), the cross-check mode.
void Linear(const OpContext& ctx, const float* x, const void* w, bool w_bf16, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate);

// Expands `rows` rows of `cols` values stored in GGML type `ggml_type` (a GgmlType's number; the
// bytes as in the file, device memory) into out [rows, cols] (device memory): bf16 (round to
// nearest even) when to_bf16, fp32 otherwise. The fp32 values equal the CPU's dequantization
// (kernels/dequant/dequant.h) bit for bit. False for a type without a device decoder.
bool DequantizeRows(const OpContext& ctx, uint32_t ggml_type, const void* blocks, int64_t rows,
                    int64_t cols, bool to_bf16, void* out);

// The noise of kernels/ops/noise.h, per its contract (Philox bit-identical to the CPU's; the
// Box-Muller floats from CUDA's logf/sinf/cosf). values: [n, n_kv_heads * head_dim], positions:
// [n], both device memory.
void AddNormAdaptiveNoiseToRows(const OpContext& ctx, uint64_t seed, int sample, int layer,
                                int trial, const int32_t* positions, int64_t n, int first_kv_head,
                                int n_kv_heads, int head_dim, float alpha, float* values);
// The standard normals of DrawNormals for one KV head: out [n, head_dim] (device memory).
void DrawNormals(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                 const int32_t* positions, int64_t n, int kv_head, int head_dim, float* out);

// AddNormAdaptiveNoise for one KV head: values [n, head_dim] (device memory) get the noise of
// head kv_head, as AddNormAdaptiveNoiseToRows gives that head.
void AddNormAdaptiveNoise(const OpContext& ctx, uint64_t seed, int sample, int layer, int trial,
                          const int32_t* positions, int64_t n, int kv_head, int head_dim,
                          float alpha, float* values);

// Log-sum-exp of each row of device logits x [m, v] (v >= 1), written to host memory (host_lse:
// m floats); synchronous.
void LogSumExp(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* host_lse);
// The vocabulary-parallel pieces of the KL and the log-sum-exp over a rank's slice of the
// vocabulary (kernels/ops/softmax.cc combines them over ranks), kl_cpu.cc's steps: the rows'
// maxima (KL: [2m], (max p, max q) per row; log-sum-exp: [m]), then the sums against the whole
// rows' maxima (KL: [3m], (Sp, Sq, cross); log-sum-exp: [m], sum exp(x - max)). Logits are
// device memory; maxima and sums host memory; synchronous.
void KlRowMaxima(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                 double* host_maxima);
void KlPartialSums(const OpContext& ctx, const float* p, const float* q, int64_t m, int64_t v,
                   const double* host_maxima, double* host_sums);
void RowMaxima(const OpContext& ctx, const float* x, int64_t m, int64_t v, double* host_maxima);
void ExpSums(const OpContext& ctx, const float* x, int64_t m, int64_t v, const double* host_maxima,
             double* host_sums);
// y = x - logsumexp(x) per row; x, y [m, v] (v >= 1) device memory, y may be x.
void LogSoftmax(const OpContext& ctx, const float* x, int64_t m, int64_t v, float* y);

// The attention statistics of kernels/ops/attention_stats.h, in double, against the keys of one
// cache (`keys`: device memory, its values unused; keys.length >= 1). q is device memory, the
// outputs host memory; both calls are synchronous.
// Window: q [w, n_heads, head_dim] (1 <= w <= keys.length); host_sum, host_sumsq
// [n_heads, keys.length]; returns the entropy.
double WindowAttentionStats(const OpContext& ctx, const float* q, int64_t w, int64_t n_heads,
                            const CacheSegment& keys, double scale, double entropy_epsilon,
                            double* host_sum, double* host_sumsq);
// H2O's accumulated attention: q [keys.length, n_heads, head_dim]; host_accumulated
// [n_kv_heads, keys.length].
void AccumulatedAttention(const OpContext& ctx, const float* q, int64_t n_heads,
                          const CacheSegment& keys, double scale, double* host_accumulated);

}  // namespace ripplekv::kernels::cuda
