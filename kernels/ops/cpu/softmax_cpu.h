#pragma once
// The CPU backend of log-sum-exp and the KL (kernels/ops/softmax.h), called only by the front end
// after its checks (no re-validation).

#include <cstdint>

namespace ripplekv::kernels::cpu {

void LogSumExp(int num_threads, const float* x, int64_t m, int64_t v, float* lse);
// The KL's steps (softmax_cpu.cc): maxima [2m] = (max p_i, max q_i) per row; sums [3m] = (Sp, Sq,
// cross) per row over this slice of the vocabulary, given the maxima of the whole rows; the KL of
// one row's (Sp, Sq, cross).
void KlRowMaxima(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                 int64_t v, double* maxima);
void KlPartialSums(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                   int64_t v, const double* maxima, double* sums);
float KlFromSums(const double* sums);
void KlDivergenceRows(int num_threads, const float* p_logits, const float* q_logits, int64_t m,
                      int64_t v, float* out);

}  // namespace ripplekv::kernels::cpu
