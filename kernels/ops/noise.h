#pragma once
// Norm-adaptive Gaussian noise on value vectors (DESIGN §2, step 2), drawn from a counter-based
// generator so that CPU and GPU, 1 or N threads, 1 or N workers draw the same noise.
//
// The noise contract (every backend follows it; the CPU backend is the reference):
//   key     = {seed low 32 bits, seed high 32 bits}
//   counter = {i, (h << 16) | b, s, (l << 16) | t}     (philox.h NoiseCounter)
//             i: token position, h: KV head, b: index of the 4-value group within the head_dim
//             vector (elements 4b .. 4b+3), s: sample, l: layer, t: trial; h, b, l, t < 65536.
//   x = Philox4x32-10(counter, key); eps[4b .. 4b+3] = Box-Muller(x) in float, exactly as in
//   philox.h BoxMuller4: u1 = float(x0 + 1) * 2^-32, u2 = float(x1) * 2^-32,
//   r = sqrtf(-2 logf(u1)), z0 = r cosf(2pi u2), z1 = r sinf(2pi u2); likewise (x2, x3) -> z2, z3.
//   scale = float(alpha * sqrt(sum_j v[j]^2 / d)), computed in double (sum in element order);
//   v'[j] = v[j] + scale * eps[j] in float; a row with scale == 0 is left untouched.
// Across devices (the CPU is the reference):
//   - bit-identical: the Philox integers (philox.h's code runs on both), hence which normal goes
//     where, and the scale (the CUDA kernel also sums ||v||^2 in double in element order; the
//     products of two floats are exact in double, so fusing them changes nothing);
//   - within a few ulp: the normals. Box-Muller calls each platform's logf, sinf and cosf, and
//     CUDA's differ from glibc's by up to 1, 2 and 1 ulp on the inputs the draws can produce
//     (exhaustively, CUDA 13's libdevice code run on the host against glibc 2.36); over 64M draws
//     81% of the normals came out bit-equal and none more than 3 ulp apart. The gpu tests hold
//     every normal within 8 ulp;
//   - so the perturbed values agree within 8 ulp of the normal times the scale (about 1e-6 of the
//     noise added) plus one ulp of v'. v' = v + scale * eps is rounded once on CUDA (fmaf), as the
//     CPU code compiles on a target with FMA (the native build); a CPU build without FMA rounds
//     the product and the sum separately.
// Within one backend results are bit-identical whatever the thread count.

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// Identifies one perturbation trial (sample s, layer l, trial t) of a calibration job.
struct NoiseKey {
  uint64_t seed = 0;  // job seed; both 32-bit halves key the generator
  int sample = 0;     // s: calibration sample index, >= 0
  int layer = 0;      // l: perturbed layer, in [0, 65536)
  int trial = 0;      // t: trial index within (s, l), in [0, 65536)
};

// The standard normals eps of the noise contract, for rows of one KV head.
// positions: [n] token positions (host memory), each >= 0; kv_head in [0, 65536); head_dim > 0, a
// multiple of 4 and at most 4 * 65536. out: [n * head_dim] (host memory), row r = eps for
// (key, positions[r], kv_head). InvalidArgument on any violated bound or size mismatch.
// Thread-safe; results do not depend on ctx.num_threads.
[[nodiscard]] Status DrawNormals(const OpContext& ctx, const NoiseKey& key,
                                 Int32View positions, int kv_head, int head_dim,
                                 std::span<float> out);

// values: [n, head_dim], the cached value vectors of KV head `kv_head` at token `positions[r]`
// (n = positions.size()), on ctx's device like positions, modified in place:
// v' = v + alpha * (||v||_2 / sqrt(head_dim)) * eps with eps from DrawNormals for the same
// arguments, so E||v' - v|| / ||v|| ~= alpha for every v.
// alpha must be finite and >= 0; alpha == 0 leaves values bit-identical, and so does an all-zero
// row. Values are expected finite (a non-finite row makes that row non-finite).
// Errors: InvalidArgument for the bounds of DrawNormals, a negative or non-finite alpha, or a
// values shape other than [positions.size(), head_dim]; Unimplemented on a device without a
// backend. Positions in device memory are not checked (each must be >= 0: the caller's contract).
// Not thread-safe for concurrent calls on the same values; results do not depend on
// ctx.num_threads.
[[nodiscard]] Status AddNormAdaptiveNoise(const OpContext& ctx, const NoiseKey& key,
                                          Int32View positions, int kv_head,
                                          float alpha, const TensorView& values);

// AddNormAdaptiveNoise for every KV head at once, inside projection rows: values is
// [n, n_kv_heads * head_dim] (row r holds the vectors of every head for token positions[r], head h
// at columns [h * head_dim, (h + 1) * head_dim)), and head h gets exactly what
// AddNormAdaptiveNoise(ctx, key, positions, first_kv_head + h, alpha, that head's [n, head_dim])
// would add. first_kv_head is the global index of the first head held (a tensor-parallel rank holds
// heads [first_kv_head, first_kv_head + n_kv_heads) of the model), so every rank draws the noise a
// whole model would. Errors as AddNormAdaptiveNoise's, for n_kv_heads < 1, first_kv_head < 0 or a
// width that is not n_kv_heads * head_dim too.
[[nodiscard]] Status AddNormAdaptiveNoiseToRows(const OpContext& ctx, const NoiseKey& key,
                                                Int32View positions, int n_kv_heads,
                                                float alpha, const TensorView& values,
                                                int first_kv_head = 0);

}  // namespace ripplekv::kernels
