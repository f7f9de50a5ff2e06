// Causal GQA attention on the device over one or more cache segments (kernels/ops/attention.h), as
// a tiled flash-attention kernel in fp32 on the CUDA cores (no tensor cores: TF32 would round the
// dot products far past the cross-check's bound; the gpu tests bound the difference to the CPU).
//
// Structure. One block of 128 threads takes kBQ consecutive query rows of one query head and keeps
// them in shared memory for its whole life. It walks the keys of every segment in tiles of kBK
// keys: a key tile of K and V (kBK x head_dim each) is copied into shared memory with cp.async,
// the block computes the kBQ x kBK scores from shared memory, masks them (key j visible to query i
// iff positions[j] <= q_positions[i]), updates each row's running maximum and sum (online softmax,
// fp32) and accumulates P V into registers. The copies overlap the math: V of a tile loads while
// its scores are computed, K of the next tile while P V is. No score matrix exists outside one
// tile, whatever the cache length. A row that saw no key ends with a sum of 0 and writes zeros.
//
// Threads. kTc adjacent lanes share a query row; a thread owns kRows = 4 rows (tr, tr +
// kRowGroups, ...: the rows of a warp are adjacent, so its float4 loads of Q hit distinct banks).
// Per tile it computes a 4 x kBK/kTc block of scores, register tiled (a float4 of K from shared
// memory feeds 16 FMAs, one of Q 4 x kBK/kTc), and a 4 x head_dim/kTc block of the output whose
// rows are its score rows: the softmax's rescaling stays in registers and the row reductions are
// kTc-lane shuffles. P goes through shared memory key-major, each thread's 4 rows adjacent (one
// float4 per key to write and to read back).
//
// Tiles and dynamic shared memory (head_dim is rounded up to kD, the padding zero-filled; Q, K and
// V rows are padded by 4 floats so a warp's float4 loads hit distinct banks):
//   kD  64: kBQ 64, kBK 32, kTc  8: 42 KiB     kD 128: kBQ 64, kBK 32, kTc 8: 74 KiB
//   kD 256: kBQ 32, kBK 16, kTc 16: 67 KiB     (each under the 99 KiB an sm_86/89 block may have)
// Skipping. Positions increase within a segment and head, so a block binary-searches, once, how
// many keys of each segment its largest query position can see and never loads the others: a
// causal prefill does about half of the m x keys work. q_positions need not be sorted.
//
// Cost. An 8192 x 8192 causal prefill with 32 heads of 128 is ~0.55 TFLOP (2 FMAs per visible
// score and output element), all on the fp32 FMA units, which bound the kernel: ~8 ms at an
// H100-class part's fp32 peak. Shared memory is not the limit: per kD = 128 tile a warp issues
// 4096 FFMA instructions (1024 cycles of an SM's four FMA pipes) against ~450 shared-memory
// wavefronts (one a cycle per SM). Nor is memory: a block reads 32 KiB of K and V per
// 64 x 32 x 128 x 2 FMAs (16 FMAs a byte, mostly from L2: the heads of one KV group are adjacent
// in the grid and run together). 74 KiB of shared memory and about 170 registers a thread allow 3
// blocks (12 warps) per H100 SM; the cp.async overlap and the other blocks hide the latencies. The
// largest-position query tiles are launched first to shorten the tail. A decode step (m = 1)
// takes one block per head with 1 of its 64 rows live: correct, not tuned (no split over keys).

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/ops/cuda/attention.h"
#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kWarp = 32;

struct Segments {
  CacheSegment s[kMaxSegments];
  int count;
};

struct Params {
  const float* q;              // [m, n_heads, d]
  const int32_t* q_positions;  // [m]
  float* out;                  // [m, n_heads, d]
  int64_t m, n_heads, d;
  int64_t group;  // query heads per KV head
  float scale;
  bool vec4;  // d % 4 == 0 and q, out, k and v 16-byte aligned: rows move as float4
  Segments segs;
};

template <int kDim, int kThreadsPerRow, int kKeyTile>
struct Tiling {
  static constexpr int kD = kDim;  // head_dim rounded up; the padding is zero in shared memory
  static constexpr int kThreads = 128;
  static constexpr int kTc = kThreadsPerRow;  // threads sharing a query row (adjacent lanes)
  static constexpr int kRows = 4;             // query rows per thread (one float4 of P per key)
  static constexpr int kRowGroups = kThreads / kTc;
  static constexpr int kBQ = kRowGroups * kRows;  // query rows per block
  static constexpr int kBK = kKeyTile;            // keys per tile
  static constexpr int kKeys = kBK / kTc;         // scores per row per thread and tile
  static constexpr int kCols = kD / kTc;          // output columns per row per thread
  static constexpr int kStride = kD + 4;          // floats per Q, K or V row in shared memory
  // Shared memory, in floats then ints: Q [kBQ][kStride], K and V [kBK][kStride], P [kBK][kBQ],
  // key positions [kBK], query positions [kBQ], visible keys per segment [kMaxSegments].
  static constexpr int kK = kBQ * kStride;
  static constexpr int kV = kK + kBK * kStride;
  static constexpr int kP = kV + kBK * kStride;
  static constexpr int kFloats = kP + kBK * kBQ;
  static constexpr size_t kSharedBytes =
      sizeof(float) * kFloats + sizeof(int32_t) * (kBK + kBQ + kMaxSegments);
  static_assert(kWarp % kTc == 0, "a row's threads lie in one warp");
  static_assert(kBK % kTc == 0 && kBK % 4 == 0, "keys split evenly over a row's threads");
  static_assert(kD % (4 * kTc) == 0, "columns split in float4s over a row's threads");
  static_assert(kBQ <= kThreads && kBK <= kThreads && kMaxSegments <= kThreads,
                "one thread per query position, key position or segment");
  static_assert(kSharedBytes <= 99 * 1024, "fits an sm_86/89 block");
};

using Tiling64 = Tiling<64, 8, 32>;
using Tiling128 = Tiling<128, 8, 32>;
using Tiling256 = Tiling<256, 16, 16>;

// Queues the copy of rows [0, kRowCount) of `src` (row r at src + r * src_stride, d floats) into
// dst rows of T::kStride floats, zero-filling rows >= n_valid and columns [d, T::kD). `src` is a
// valid address even when no row is (it is never read then).
template <class T, int kRowCount>
__device__ void CopyRowsAsync(float* dst, const float* src, int64_t src_stride, int n_valid,
                              int64_t d, bool vec4) {
  constexpr int kChunks = T::kD / 4;
  for (int idx = static_cast<int>(threadIdx.x); idx < kRowCount * kChunks; idx += T::kThreads) {
    const int r = idx / kChunks;
    const int64_t e = 4 * (idx % kChunks);
    float* to = dst + r * T::kStride + e;
    if (vec4) {
      const bool ok = r < n_valid && e < d;
      __pipeline_memcpy_async(to, ok ? src + r * src_stride + e : src, 16, ok ? 0 : 16);
    } else {
      for (int l = 0; l < 4; ++l) {
        const bool ok = r < n_valid && e + l < d;
        __pipeline_memcpy_async(to + l, ok ? src + r * src_stride + e + l : src, 4, ok ? 0 : 4);
      }
    }
  }
}

// The tile after (s, j0): the next kBK keys of segment s, else the first of the next segment
// with a visible key; s == count when none is left.
template <class T>
__device__ void NextTile(const int32_t* visible, int count, int& s, int& j0) {
  j0 += T::kBK;
  while (s < count && j0 >= visible[s]) {
    ++s;
    j0 = 0;
  }
}

// Queues K (or V) of tile (s, j0) into dst; K's tile also stores its positions (synchronously).
template <class T>
__device__ void LoadTile(const Params& p, const int32_t* visible, int64_t kvh, int s, int j0,
                         bool keys, float* dst, int32_t* key_pos) {
  const CacheSegment& seg = p.segs.s[s];
  const int n_valid = min(T::kBK, visible[s] - j0);
  const int64_t row0 = kvh * seg.capacity + j0;
  CopyRowsAsync<T, T::kBK>(dst, (keys ? seg.k : seg.v) + row0 * p.d, p.d, n_valid, p.d, p.vec4);
  if (keys && static_cast<int>(threadIdx.x) < n_valid) {
    key_pos[threadIdx.x] = seg.positions[row0 + threadIdx.x];
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads) AttentionKernel(const Params p) {
  extern __shared__ float4 shared_raw[];
  float* const qs = reinterpret_cast<float*>(shared_raw);
  float* const ks = qs + T::kK;
  float* const vs = qs + T::kV;
  float* const ps = qs + T::kP;
  int32_t* const key_pos = reinterpret_cast<int32_t*>(qs + T::kFloats);
  int32_t* const q_pos = key_pos + T::kBK;
  int32_t* const visible = q_pos + T::kBQ;  // keys of each segment the block's queries can see

  const int tid = static_cast<int>(threadIdx.x);
  const int tc = tid % T::kTc, tr = tid / T::kTc;
  const int64_t n_query_tiles = (p.m + T::kBQ - 1) / T::kBQ;
  const int64_t q0 = (n_query_tiles - 1 - blockIdx.x / p.n_heads) * T::kBQ;
  const int64_t h = blockIdx.x % p.n_heads;
  const int64_t kvh = h / p.group;
  const int rows = static_cast<int>(min(static_cast<int64_t>(T::kBQ), p.m - q0));
  const int count = p.segs.count;

  if (tid < T::kBQ) q_pos[tid] = tid < rows ? p.q_positions[q0 + tid] : INT_MIN;
  __syncthreads();
  if (tid < count) {  // entries are position-sorted: the visible ones are a prefix
    int32_t max_pos = INT_MIN;
    for (int r = 0; r < rows; ++r) max_pos = max(max_pos, q_pos[r]);
    const CacheSegment& seg = p.segs.s[tid];
    const int32_t* pos = seg.positions + kvh * seg.capacity;
    int lo = 0, hi = seg.length;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (pos[mid] <= max_pos) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    visible[tid] = lo;
  }
  __syncthreads();

  int32_t row_pos[T::kRows];
#pragma unroll
  for (int i = 0; i < T::kRows; ++i) row_pos[i] = q_pos[tr + T::kRowGroups * i];

  int s = 0, j0 = -T::kBK;
  NextTile<T>(visible, count, s, j0);
  const int64_t q_stride = p.n_heads * p.d;
  CopyRowsAsync<T, T::kBQ>(qs, p.q + q0 * q_stride + h * p.d, q_stride, rows, p.d, p.vec4);
  if (s < count) LoadTile<T>(p, visible, kvh, s, j0, /*keys=*/true, ks, key_pos);
  __pipeline_commit();

  float acc[T::kRows][T::kCols];
  float row_max[T::kRows], row_sum[T::kRows];  // row_sum: this thread's keys only
#pragma unroll
  for (int i = 0; i < T::kRows; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < T::kCols; ++c) acc[i][c] = 0.0f;
  }

  while (s < count) {
    __pipeline_wait_prior(0);
    __syncthreads();  // Q and K of this tile are in; every thread is done with the last V
    LoadTile<T>(p, visible, kvh, s, j0, /*keys=*/false, vs, key_pos);
    __pipeline_commit();

    // Scores of rows tr + kRowGroups * i with keys tc + kTc * j.
    float score[T::kRows][T::kKeys];
#pragma unroll
    for (int i = 0; i < T::kRows; ++i) {
#pragma unroll
      for (int j = 0; j < T::kKeys; ++j) score[i][j] = 0.0f;
    }
#pragma unroll 4
    for (int e = 0; e < T::kD; e += 4) {
      float4 qv[T::kRows];
#pragma unroll
      for (int i = 0; i < T::kRows; ++i) {
        qv[i] = *reinterpret_cast<const float4*>(qs + (tr + T::kRowGroups * i) * T::kStride + e);
      }
#pragma unroll
      for (int j = 0; j < T::kKeys; ++j) {
        const float4 kv = *reinterpret_cast<const float4*>(ks + (tc + T::kTc * j) * T::kStride + e);
#pragma unroll
        for (int i = 0; i < T::kRows; ++i) {
          score[i][j] = fmaf(qv[i].x, kv.x, score[i][j]);
          score[i][j] = fmaf(qv[i].y, kv.y, score[i][j]);
          score[i][j] = fmaf(qv[i].z, kv.z, score[i][j]);
          score[i][j] = fmaf(qv[i].w, kv.w, score[i][j]);
        }
      }
    }

    // Online softmax: mask, the row's new maximum over its kTc threads, rescale what was summed.
    const int n_valid = min(T::kBK, visible[s] - j0);
#pragma unroll
    for (int i = 0; i < T::kRows; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < T::kKeys; ++j) {
        const int c = tc + T::kTc * j;
        const bool seen = c < n_valid && key_pos[c] <= row_pos[i];
        score[i][j] = seen ? score[i][j] * p.scale : -INFINITY;
        tile_max = fmaxf(tile_max, score[i][j]);
      }
#pragma unroll
      for (int offset = T::kTc / 2; offset > 0; offset /= 2) {
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      }
      const float new_max = fmaxf(row_max[i], tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing seen yet: all p = 0
      const float correction = expf(row_max[i] - base);
      row_max[i] = new_max;
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < T::kKeys; ++j) {
        score[i][j] = expf(score[i][j] - base);
        tile_sum += score[i][j];
      }
      row_sum[i] = row_sum[i] * correction + tile_sum;
#pragma unroll
      for (int c = 0; c < T::kCols; ++c) acc[i][c] *= correction;
    }
    static_assert(T::kRows == 4, "one float4 of P per key and thread");
#pragma unroll
    for (int j = 0; j < T::kKeys; ++j) {
      *reinterpret_cast<float4*>(ps + (tc + T::kTc * j) * T::kBQ + tr * T::kRows) =
          make_float4(score[0][j], score[1][j], score[2][j], score[3][j]);
    }

    __syncthreads();  // every thread is done with K and the key positions
    int next_s = s, next_j0 = j0;
    NextTile<T>(visible, count, next_s, next_j0);
    if (next_s < count) LoadTile<T>(p, visible, kvh, next_s, next_j0, /*keys=*/true, ks, key_pos);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();  // V of this tile is in; P is written

    // acc[i][4k + l] += sum_c P[row i][c] V[c][4 tc + 4 kTc k + l]
#pragma unroll 4
    for (int c = 0; c < T::kBK; ++c) {
      const float4 pr = *reinterpret_cast<const float4*>(ps + c * T::kBQ + tr * T::kRows);
      const float* v_row = vs + c * T::kStride + 4 * tc;
#pragma unroll
      for (int k = 0; k < T::kCols / 4; ++k) {
        const float4 v = *reinterpret_cast<const float4*>(v_row + 4 * T::kTc * k);
        const float pi[T::kRows] = {pr.x, pr.y, pr.z, pr.w};
#pragma unroll
        for (int i = 0; i < T::kRows; ++i) {
          acc[i][4 * k + 0] = fmaf(pi[i], v.x, acc[i][4 * k + 0]);
          acc[i][4 * k + 1] = fmaf(pi[i], v.y, acc[i][4 * k + 1]);
          acc[i][4 * k + 2] = fmaf(pi[i], v.z, acc[i][4 * k + 2]);
          acc[i][4 * k + 3] = fmaf(pi[i], v.w, acc[i][4 * k + 3]);
        }
      }
    }
    s = next_s;
    j0 = next_j0;
  }
  __pipeline_wait_prior(0);  // Q's copy when no key was visible

#pragma unroll
  for (int i = 0; i < T::kRows; ++i) {
    float sum = row_sum[i];
#pragma unroll
    for (int offset = T::kTc / 2; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    const int r = tr + T::kRowGroups * i;
    if (r >= rows) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // no visible key: zeros
    float* o = p.out + (q0 + r) * q_stride + h * p.d;
#pragma unroll
    for (int k = 0; k < T::kCols / 4; ++k) {
      const int64_t col = 4 * tc + 4 * T::kTc * k;
      if (col >= p.d) continue;
      const float4 v = make_float4(acc[i][4 * k] * inv, acc[i][4 * k + 1] * inv,
                                   acc[i][4 * k + 2] * inv, acc[i][4 * k + 3] * inv);
      if (p.vec4) {
        *reinterpret_cast<float4*>(o + col) = v;
      } else {
        const float vals[4] = {v.x, v.y, v.z, v.w};
        for (int l = 0; l < 4 && col + l < p.d; ++l) o[col + l] = vals[l];
      }
    }
  }
}

template <class T>
int Launch(const OpContext& ctx, const Params& p, cudaStream_t stream) {
  const auto kernel = AttentionKernel<T>;
  if (!CheckCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(T::kSharedBytes)),
                 "CausalAttention: shared memory")) {
    return LaunchResult(ctx, "CausalAttention: shared memory");
  }
  const int64_t blocks = (p.m + T::kBQ - 1) / T::kBQ * p.n_heads;
  kernel<<<static_cast<unsigned>(blocks), T::kThreads, T::kSharedBytes, stream>>>(p);
  return LaunchResult(ctx, "CausalAttention");
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

int CausalAttention(const OpContext& ctx, const float* q, const int32_t* q_positions, int64_t m,
                    int64_t n_heads, int64_t head_dim, const CacheSegment* segments,
                    int n_segments, float scale, float* out) {
  if (m == 0 || n_heads == 0 || head_dim == 0) return 0;
  Params p{};
  p.q = q;
  p.q_positions = q_positions;
  p.out = out;
  p.m = m;
  p.n_heads = n_heads;
  p.d = head_dim;
  p.group = n_heads / segments[0].n_kv_heads;
  p.scale = scale;
  p.vec4 = head_dim % 4 == 0 && Aligned16(q) && Aligned16(out);
  for (int s = 0; s < n_segments; ++s) {
    p.segs.s[s] = segments[s];
    p.vec4 = p.vec4 && Aligned16(segments[s].k) && Aligned16(segments[s].v);
  }
  p.segs.count = n_segments;
  const cudaStream_t stream = StreamOf(ctx);
  if (head_dim <= Tiling64::kD) return Launch<Tiling64>(ctx, p, stream);
  if (head_dim <= Tiling128::kD) return Launch<Tiling128>(ctx, p, stream);
  return Launch<Tiling256>(ctx, p, stream);
}

}  // namespace ripplekv::kernels::cuda
