// Causal GQA attention on the CPU. For each query head and block of queries: scores = Q K^T
// (BLAS, over the key prefix of each segment the block can see), one masked softmax across all
// segments, out = sum over segments of P V (BLAS). Query heads read their group's KV head in
// place (no repeated copies). The work items (head, block) are independent and each is computed
// the same way whatever the thread count.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops/cpu/attention_cpu.h"
#include "kernels/ops/cpu/blas_threads.h"
#include "kernels/ops/cpu/vec_math.h"

namespace ripplekv::kernels::cpu {

namespace {
constexpr int64_t kQueryBlock = 128;  // queries per work item: scores stay in L2 (128 x len fp32)

// Softmax over row[0, n) for keys visible to query position qpos; masked keys get 0.
void MaskedSoftmax(float* row, const int32_t* kpos, int64_t n, int32_t qpos) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (kpos[j] <= qpos) mx = std::max(mx, row[j]);
  }
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + n, 0.0f);
    return;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = kpos[j] <= qpos ? ExpF(row[j] - mx) : 0.0f;
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}
}  // namespace

void CausalAttention(int num_threads, const float* q, const int32_t* q_positions, int64_t m,
                     int64_t n_heads, std::span<const KvCacheView> segments, float scale,
                     float* out) {
  UseSingleThreadedBlas();
  const int64_t d = segments[0].head_dim;
  const int64_t group = n_heads / segments[0].n_kv_heads;
  const int64_t n_blocks = (m + kQueryBlock - 1) / kQueryBlock;
  const int64_t row_stride = n_heads * d;  // between consecutive queries of one head
  const int64_t n_items = n_heads * n_blocks;
  const int64_t n_segments = static_cast<int64_t>(segments.size());

  // BLAS is single-threaded (blas_threads.h); the parallelism is over work items.
#pragma omp parallel num_threads(num_threads) if (n_items > 1)
  {
    std::vector<float> scores;
    std::vector<int32_t> key_positions;
    std::vector<int64_t> n_keys(n_segments), offset(n_segments + 1);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < n_items; ++item) {
      const int64_t h = item / n_blocks;
      const int64_t b = item % n_blocks;
      const int64_t kvh = h / group;
      const int64_t q0 = b * kQueryBlock;
      const int64_t nq = std::min(kQueryBlock, m - q0);
      const int32_t max_qpos = *std::max_element(q_positions + q0, q_positions + q0 + nq);
      // Entries are in increasing position order, so each segment's visible keys are a prefix.
      for (int64_t s = 0; s < n_segments; ++s) {
        const int32_t* kpos = segments[s].positions + kvh * segments[s].capacity;
        n_keys[s] = std::upper_bound(kpos, kpos + segments[s].length, max_qpos) - kpos;
        offset[s + 1] = offset[s] + n_keys[s];
      }
      const int64_t total = offset[n_segments];
      float* o = out + q0 * row_stride + h * d;
      if (total == 0) {
        for (int64_t i = 0; i < nq; ++i) std::fill(o + i * row_stride, o + i * row_stride + d, 0.f);
        continue;
      }
      scores.resize(static_cast<size_t>(nq * total));
      key_positions.resize(static_cast<size_t>(total));
      const float* qh = q + q0 * row_stride + h * d;
      for (int64_t s = 0; s < n_segments; ++s) {
        if (n_keys[s] == 0) continue;
        const KvCacheView& seg = segments[s];
        const float* kh = seg.k + kvh * seg.capacity * d;
        std::copy_n(seg.positions + kvh * seg.capacity, n_keys[s], key_positions.data() + offset[s]);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n_keys[s], d, scale, qh,
                    row_stride, kh, d, 0.0f, scores.data() + offset[s], total);
      }
      for (int64_t i = 0; i < nq; ++i) {
        MaskedSoftmax(scores.data() + i * total, key_positions.data(), total, q_positions[q0 + i]);
      }
      bool first = true;
      for (int64_t s = 0; s < n_segments; ++s) {
        if (n_keys[s] == 0) continue;
        const KvCacheView& seg = segments[s];
        const float* vh = seg.v + kvh * seg.capacity * d;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, d, n_keys[s], 1.0f,
                    scores.data() + offset[s], total, vh, d, first ? 0.0f : 1.0f, o, row_stride);
        first = false;
      }
    }
  }
}

}  // namespace ripplekv::kernels::cpu
