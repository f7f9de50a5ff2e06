#pragma once
// Seeded random numbers (evaluation examples, control maps): SplitMix64 (Steele, Lea & Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014) with distributions written out
// here, so a seed gives the same draws on every platform and standard library (std::
// distributions are implementation-defined).

#include <cstdint>

#include "base/check.h"

namespace ripplekv::base {

// The SplitMix64 output function: a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A seed for one stream, e.g. (user seed, task id, example index): distinct inputs give
// unrelated streams.
inline uint64_t StreamSeed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return Mix64(Mix64(Mix64(seed) ^ (a + 0x9E3779B97F4A7C15ull)) ^ (b + 0x632BE59BD9B4E019ull));
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix64(state_);
  }

  // Uniform in [0, n), n >= 1, by rejection (no modulo bias).
  uint64_t Below(uint64_t n) {
    RIPPLEKV_CHECK(n >= 1);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // multiple of n
    uint64_t x = Next();
    while (x >= limit) x = Next();
    return x % n;
  }

  // Uniform in [lo, hi], lo <= hi.
  int64_t Between(int64_t lo, int64_t hi) {
    RIPPLEKV_CHECK(lo <= hi);
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
  }

 private:
  uint64_t state_;
};

}  // namespace ripplekv::base
