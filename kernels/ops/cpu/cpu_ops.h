#pragma once
// CPU backends of the ops in kernels/ops/*.h. Called only by the front ends, after the shapes
// have been checked; they do not re-validate. OpenBLAS is used single-threaded (set once, process
// wide, by Linear); the backends parallelize over independent work items with OpenMP.

#include <cstdint>
#include <span>

#include "kernels/ops/activation.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/attention_stats.h"
#include "kernels/ops/gather.h"
#include "kernels/ops/kv_cache_ops.h"
#include "kernels/ops/linear.h"
#include "kernels/ops/noise.h"
#include "kernels/ops/norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/softmax.h"

namespace ripplekv::kernels::cpu {

// Sets OpenBLAS to one thread, once per process. Every backend calling BLAS calls it first.
void UseSingleThreadedBlas();

// y = x * W^T over a stored weight (kernels/dequant/weight.h): the slices of Linear, each expanded
// into a per-thread fp32 buffer first.
void LinearStored(int num_threads, const float* x, int64_t x_stride, const Weight& w,
                  const float* bias, float* y, int64_t m, bool accumulate);

void Linear(int num_threads, const float* x, int64_t x_stride, const float* w, const float* bias,
            float* y, int64_t m, int64_t n, int64_t k, bool accumulate);
// KV-cache writes (kv_cache_ops.h), after the front end's checks.
void KvAppend(const float* k_rows, const float* v_rows, const int32_t* positions, int64_t n,
              const KvLayerRef& layer);
void KvRetain(const int32_t* keep, int count, const KvLayerRef& layer);
// out = src rows [first, first + n_rows) (d floats each), one contiguous copy.
void CopyRows(const float* src, int64_t d, int64_t first, int64_t n_rows, float* out);
// out[i] = src row rows[i] (d floats each), i in [0, n_rows).
void GatherRows(const float* src, int64_t d, const int32_t* rows, int64_t n_rows, float* out);
// out[i] = table row tokens[i] expanded to fp32 (table.cols() floats each).
void EmbeddingLookup(const Weight& table, const int32_t* tokens, int64_t n, float* out);
void RmsNorm(int num_threads, const float* x, const float* weight, float eps, float* y, int64_t m,
             int64_t d);
void ApplyRope(int num_threads, const RopeTable& table, const int32_t* positions, float* x,
               int64_t m, int64_t n_heads, int64_t head_dim);
void SwiGlu(int num_threads, const float* gate, const float* up, float* out, int64_t n);
void AddTo(int num_threads, const float* x, float* y, int64_t n);
void CausalAttention(int num_threads, const float* q, const int32_t* q_positions, int64_t m,
                     int64_t n_heads, std::span<const KvCacheView> segments, float scale,
                     float* out);
// Window statistics (attention_stats.h) into sum and sumsq ([n_heads, keys.length]); returns the
// entropy. q: [w, n_heads, head_dim].
double WindowAttentionStats(int num_threads, const float* q, int64_t w, int64_t n_heads,
                            const KvCacheView& keys, double scale, double entropy_epsilon,
                            double* sum, double* sumsq);
// Accumulated attention (attention_stats.h) into accumulated ([n_kv_heads, keys.length]).
// q: [keys.length, n_heads, head_dim].
void AccumulatedAttention(int num_threads, const float* q, int64_t n_heads,
                          const KvCacheView& keys, double scale, double* accumulated);
void LogSumExp(int num_threads, const float* x, int64_t m, int64_t v, float* lse);
// The KL's steps (kl_cpu.cc): maxima [2m] = (max p_i, max q_i) per row; sums [3m] = (Sp, Sq,
// cross) per row over this slice of the vocabulary, given the maxima of the whole rows; the KL of
// one row's (Sp, Sq, cross).
void KlRowMaxima(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                 int64_t v, double* maxima);
void KlPartialSums(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                   int64_t v, const double* maxima, double* sums);
float KlFromSums(const double* sums);
void KlDivergenceRows(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* out);
void DrawNormals(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                 int kv_head, int64_t head_dim, float* out);
// values: n rows of head_dim floats, row r at values + r * row_stride.
void AddNormAdaptiveNoise(int num_threads, const NoiseKey& key, const int32_t* positions, int64_t n,
                          int kv_head, float alpha, float* values, int64_t head_dim,
                          int64_t row_stride);

}  // namespace ripplekv::kernels::cpu
