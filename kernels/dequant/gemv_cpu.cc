// Portable fused dequantize-dot kernels. A row is decoded a chunk of at most 256 values at a time
// into a buffer on the stack (L1-resident; the fp32 row never exists) by the same block decoders
// that Dequantize() uses (the portable ones, DequantizeBlocksScalar, bit-identical to the AVX2
// decoders), so every weight is Dequantize()'s value by construction. Products are
// added to eight running sums (value k of the row goes to sum k % 8, in increasing k), which are
// combined in a fixed tree: a loop shape compilers vectorize without reassociating anything.

#include "kernels/dequant/gemv_cpu.h"

#include "base/check.h"
#include "kernels/dequant/dequant_cpu.h"

namespace ripplekv::kernels::cpu {

namespace {

constexpr int64_t kChunkValues = 256;  // one k-quant super-block, 8 blocks of 32, 256 plain values

// s[k % 8] += w[k] * x[k] for k in [0, n), k increasing; callers pass chunks that start at a
// multiple of 8 values into the row.
inline void Accumulate(const float* __restrict w, const float* __restrict x, int64_t n,
                       float (&s)[8]) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int l = 0; l < 8; ++l) s[l] += w[k + l] * x[k + l];
  }
  for (; k < n; ++k) s[k & 7] += w[k] * x[k];
}

template <GgmlType kType>
float PortableDot(const uint8_t* row, const float* x, int64_t n_blocks) {
  const GgmlTypeTraits traits = TraitsOf(kType);
  const int64_t chunk_blocks = kChunkValues / traits.block_elements;
  float buffer[kChunkValues];
  float s[8] = {};
  for (int64_t b = 0; b < n_blocks; b += chunk_blocks) {
    const int64_t nb = b + chunk_blocks <= n_blocks ? chunk_blocks : n_blocks - b;
    DequantizeBlocksScalar(kType, row + b * traits.block_bytes, nb, buffer);
    Accumulate(buffer, x + b * traits.block_elements, nb * traits.block_elements, s);
  }
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

}  // namespace

GemvRowKernel ScalarGemvKernel(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return PortableDot<GgmlType::kF32>;
    case GgmlType::kF16:
      return PortableDot<GgmlType::kF16>;
    case GgmlType::kBF16:
      return PortableDot<GgmlType::kBF16>;
    case GgmlType::kQ8_0:
      return PortableDot<GgmlType::kQ8_0>;
    case GgmlType::kQ4_0:
      return PortableDot<GgmlType::kQ4_0>;
    case GgmlType::kQ4_1:
      return PortableDot<GgmlType::kQ4_1>;
    case GgmlType::kQ5_0:
      return PortableDot<GgmlType::kQ5_0>;
    case GgmlType::kQ5_1:
      return PortableDot<GgmlType::kQ5_1>;
    case GgmlType::kQ4_K:
      return PortableDot<GgmlType::kQ4_K>;
    case GgmlType::kQ5_K:
      return PortableDot<GgmlType::kQ5_K>;
    case GgmlType::kQ6_K:
      return PortableDot<GgmlType::kQ6_K>;
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
  return nullptr;
}

void GemvRows(GemvRowKernel kernel, const uint8_t* w, int64_t row_bytes, int64_t rows,
              int64_t n_blocks, const float* x, float* y, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1 && rows > 1)
  for (int64_t r = 0; r < rows; ++r) y[r] = kernel(w + r * row_bytes, x, n_blocks);
}

}  // namespace ripplekv::kernels::cpu
