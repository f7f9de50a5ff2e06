#pragma once
// The CPU backend of the attention statistics (kernels/ops/attention_stats.h), called only by the
// front end after its checks (no re-validation).

#include <cstdint>

#include "kernels/ops/attention.h"

namespace ripplekv::kernels::cpu {

// Window statistics (attention_stats.h) into sum and sumsq ([n_heads, keys.length]); returns the
// entropy. q: [w, n_heads, head_dim].
double WindowAttentionStats(int num_threads, const float* q, int64_t w, int64_t n_heads,
                            const KvCacheView& keys, double scale, double entropy_epsilon,
                            double* sum, double* sumsq);
// Accumulated attention (attention_stats.h) into accumulated ([n_kv_heads, keys.length]).
// q: [keys.length, n_heads, head_dim].
void AccumulatedAttention(int num_threads, const float* q, int64_t n_heads,
                          const KvCacheView& keys, double scale, double* accumulated);

}  // namespace ripplekv::kernels::cpu
