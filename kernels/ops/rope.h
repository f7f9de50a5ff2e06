#pragma once
// Rotary position embedding applied in place to query or key heads.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

enum class RopePairing {
  kInterleaved,  // rotate (x[2i], x[2i+1])
  kHalfSplit,    // rotate (x[i], x[i + d/2])
};

// Per-pair inverse frequencies theta^(-2i/d), optionally divided by per-pair factors
// (llama.cpp's rope_freqs tensor: Llama 3 scaling). Built once per model.
struct RopeTable {
  RopePairing pairing = RopePairing::kInterleaved;
  std::vector<float> inv_freq;  // [head_dim / 2]
};

struct Llama3Scaling {
  float factor = 0.0f;  // 0: none
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_positions = 8192;
};

// head_dim must be even. freq_factors: empty or head_dim/2 divisors (GGUF rope_freqs). llama3:
// applied when factor > 0 (HF configs); do not pass both.
StatusOr<RopeTable> MakeRopeTable(int head_dim, float theta, RopePairing pairing,
                                  std::span<const float> freq_factors, const Llama3Scaling& llama3);

// x: [M, H, head_dim] (rows of H heads), positions: [M]. Angles computed in double for accuracy
// at long positions, then rotated in fp32.
[[nodiscard]] Status ApplyRope(const OpContext& ctx, const RopeTable& table,
                               Int32View positions, const TensorView& x);

}  // namespace ripplekv::kernels
