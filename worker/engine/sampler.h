#pragma once
// Picks the next token from a row of logits.

#include <cstdint>
#include <random>
#include <span>

namespace ripplekv::worker {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  int top_k = 0;             // 0: whole vocabulary
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  uint64_t seed = 0;         // same seed + same logits → same tokens
};

// Not thread-safe (owns a random engine); one per sequence.
class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options) : options_(options), rng_(options.seed) {}
  int32_t Sample(std::span<const float> logits);

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace ripplekv::worker
