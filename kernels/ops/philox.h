#pragma once
// Philox4x32-10 counter-based generator (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
// easy as 1, 2, 3", SC'11; the Random123 reference), the DESIGN §2 noise counter layout, and the
// Box-Muller transform of the noise contract (kernels/ops/noise.h).
//
// Header-only and dependency-free so the same code runs on the host and, compiled by nvcc, inside
// CUDA kernels: plain 32/64-bit integer arithmetic, no intrinsics, no std:: containers. Every
// function is a pure function of its arguments (thread-safe, no state).

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RIPPLEKV_HOST_DEVICE __host__ __device__
#else
#define RIPPLEKV_HOST_DEVICE
#endif

namespace ripplekv::kernels {

// 128-bit counter and 64-bit key, as four and two 32-bit words (word 0 first, as in Random123).
struct PhiloxCounter {
  uint32_t v[4];
};
struct PhiloxKey {
  uint32_t v[2];
};

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3)-1)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

namespace internal {

RIPPLEKV_HOST_DEVICE constexpr PhiloxCounter PhiloxRound(const PhiloxCounter& c,
                                                         const PhiloxKey& k) {
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c.v[0];
  const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c.v[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return PhiloxCounter{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}

}  // namespace internal

// Philox4x32 with 10 rounds: the bijection of `ctr` selected by `key`. Matches Random123's
// philox4x32_10 (checked against its published known-answer vectors in noise_test.cc).
RIPPLEKV_HOST_DEVICE constexpr PhiloxCounter Philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      key.v[0] += kPhiloxW0;
      key.v[1] += kPhiloxW1;
    }
    ctr = internal::PhiloxRound(ctr, key);
  }
  return ctr;
}

// The key of a calibration job's noise: the 64-bit seed, low word first.
RIPPLEKV_HOST_DEVICE constexpr PhiloxKey NoiseKeyWords(uint64_t seed) {
  return PhiloxKey{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
}

// The counter of the 4 normals at head_dim offsets [4 * block, 4 * block + 4) of the value vector
// at token `position`, KV head `kv_head`, in trial (sample, layer, trial) — DESIGN §2:
//   {position, (kv_head << 16) | block, sample, (layer << 16) | trial}.
// kv_head, block, layer and trial must be < 65536 (the front end checks; here they are masked).
RIPPLEKV_HOST_DEVICE constexpr PhiloxCounter NoiseCounter(uint32_t position, uint32_t kv_head,
                                                          uint32_t block, uint32_t sample,
                                                          uint32_t layer, uint32_t trial) {
  return PhiloxCounter{{position, ((kv_head & 0xFFFFu) << 16) | (block & 0xFFFFu), sample,
                        ((layer & 0xFFFFu) << 16) | (trial & 0xFFFFu)}};
}

// Box-Muller of one Philox output into 4 standard normals, in float, exactly as the noise contract
// (kernels/ops/noise.h) states; backends must not reorder or fuse it differently:
//   u1 = float(x0 + 1) * 2^-32    (x0 + 1 in 64-bit, one round-to-nearest: u1 in (0, 1])
//   u2 = float(x1) * 2^-32        ([0, 1]; 1 only by rounding, harmless: cos/sin are periodic)
//   r = sqrtf(-2 * logf(u1)),  a = 2pi_f * u2,  z0 = r * cosf(a),  z1 = r * sinf(a)
// and the same for (x2, x3) -> (z2, z3). The largest |z| is sqrt(-2 ln 2^-32) ~ 6.66.
RIPPLEKV_HOST_DEVICE inline void BoxMuller4(const PhiloxCounter& x, float z[4]) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  constexpr float kTwoPow32Inv = 2.3283064365386963e-10f;  // 2^-32, exact
  for (int pair = 0; pair < 2; ++pair) {
    const float u1 = static_cast<float>(static_cast<uint64_t>(x.v[2 * pair]) + 1u) * kTwoPow32Inv;
    const float u2 = static_cast<float>(x.v[2 * pair + 1]) * kTwoPow32Inv;
    const float r = ::sqrtf(-2.0f * ::logf(u1));
    const float a = kTwoPi * u2;
    z[2 * pair] = r * ::cosf(a);
    z[2 * pair + 1] = r * ::sinf(a);
  }
}

}  // namespace ripplekv::kernels
