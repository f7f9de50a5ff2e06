// Attention statistics on the device (kernels/ops/attention_stats.h), in double, with the CPU's
// arithmetic (kernels/ops/cpu/attention_stats_cpu.cc) and, where it decides the rounding, its
// order. Nothing of size n x n is stored: two passes recompute the scores instead.
//   1. Row pass, one warp per (head, query): the softmax's maximum and normalizer z of the query's
//      row. Each lane computes whole dot products q . k_j in element order (the products of two
//      floats are exact in double, so they equal the CPU's bit for bit), and z is summed in key
//      order, like the CPU's.
//   2. Column pass, one thread per (head, key j): a = exp(scale * q . k_j - max) / z for every
//      query that sees j, taken in query order, so each head's sums over the queries are the CPU's
//      sums in the CPU's order. H2O's per-group totals then add the heads of a group in head order.
// What differs from the CPU is CUDA's double exp and log (within an ulp of glibc's) and the
// grouping of the window entropy: the CPU adds its terms query by query, the device key by key
// (per-key partials on the device, summed on the host in key order, then over heads in order).
// A first, simple kernel: each key is read from global memory (cached) once per query.

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "kernels/ops/cuda/attention_stats.h"
#include "kernels/ops/cuda/launch.cuh"

namespace ripplekv::kernels::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kColumnThreads = 128;

// sum_e q[e] * k[e] in element order, in double (the CPU's AttentionRow).
__device__ double Dot(const float* q, const float* k, int64_t d) {
  double dot = 0.0;
  for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
  return dot;
}

// The score of a query with a key, rounded like the CPU's stored probs[j] = dot * scale (not
// fused into the subtraction of the maximum that follows).
__device__ double Score(const float* q, const float* k, int64_t d, double scale) {
  return __dmul_rn(Dot(q, k, d), scale);
}

// The number of cache entries at positions <= qpos (std::upper_bound over the sorted positions).
__device__ int64_t Visible(const int32_t* positions, int64_t length, int32_t qpos) {
  int64_t lo = 0, hi = length;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (positions[mid] <= qpos) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The queries: `rows` of them, query r at q + (r * n_heads + h) * d for head h, at the position of
// cache entry first_entry + r.
struct Queries {
  const float* q;
  int64_t rows, n_heads, first_entry;
};

// Row pass: row_max and row_z ([n_heads, rows]) of each (head, query).
__global__ void RowStatsKernel(Queries qs, CacheSegment keys, double scale, double* row_max,
                               double* row_z) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (item >= qs.rows * qs.n_heads) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t r = item / qs.n_heads, h = item % qs.n_heads;
  const int64_t d = keys.head_dim, group = qs.n_heads / keys.n_kv_heads;
  const float* q = qs.q + (r * qs.n_heads + h) * d;
  const float* k_head = keys.k + (h / group) * keys.capacity * d;
  const int64_t visible = Visible(keys.positions, keys.length, keys.positions[qs.first_entry + r]);
  double mx = -INFINITY;
  for (int64_t j = lane; j < visible; j += kWarp) mx = fmax(mx, Score(q, k_head + j * d, d, scale));
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
  }
  // z in key order: each lane exponentiates one key of a chunk of 32, and every lane adds the
  // chunk's terms in order (all lanes end with the same z).
  double z = 0.0;
  for (int64_t base = 0; base < visible; base += kWarp) {
    const int64_t j = base + lane;
    const double e = j < visible ? exp(Score(q, k_head + j * d, d, scale) - mx) : 0.0;
    const int64_t count = visible - base < kWarp ? visible - base : kWarp;
    for (int t = 0; t < count; ++t) z += __shfl_sync(0xffffffffu, e, t);
  }
  if (lane == 0) {
    row_max[h * qs.rows + r] = mx;
    row_z[h * qs.rows + r] = z;
  }
}

// Column pass: for head blockIdx.y and key j, the sum over the queries that see j (in query
// order) of a, into sum[h * n + j]; for the window statistics also of a^2 into sumsq and of
// -a log(a + entropy_epsilon) into entropy (keys before prefix_end only, 0 for the others).
__global__ void ColumnKernel(Queries qs, CacheSegment keys, double scale, const double* row_max,
                             const double* row_z, bool window, int64_t prefix_end,
                             double entropy_epsilon, double* sum, double* sumsq, double* entropy) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = keys.length;
  if (j >= n) return;
  const int64_t h = blockIdx.y;
  const int64_t d = keys.head_dim, group = qs.n_heads / keys.n_kv_heads;
  const float* k = keys.k + ((h / group) * keys.capacity + j) * d;
  const int32_t key_position = keys.positions[j];
  double s = 0.0, s2 = 0.0, ent = 0.0;
  for (int64_t r = 0; r < qs.rows; ++r) {
    if (keys.positions[qs.first_entry + r] < key_position) continue;  // j not visible to r
    const double e =
        exp(Score(qs.q + (r * qs.n_heads + h) * d, k, d, scale) - row_max[h * qs.rows + r]);
    const double a = e / row_z[h * qs.rows + r];
    s += a;
    if (window) {
      s2 += a * a;
      if (j < prefix_end) ent -= a * log(a + entropy_epsilon);
    }
  }
  sum[h * n + j] = s;
  if (window) {
    sumsq[h * n + j] = s2;
    entropy[h * n + j] = ent;
  }
}

// accumulated[g * n + j] = the sum over the heads h of group g, in head order, of
// per_head[h * n + j].
__global__ void GroupSumKernel(const double* per_head, int64_t n, int64_t n_kv_heads, int64_t group,
                               double* accumulated) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= n_kv_heads * n) return;
  const int64_t g = item / n, j = item % n;
  double acc = 0.0;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) acc += per_head[h * n + j];
  accumulated[item] = acc;
}

// Device scratch from the stream's pool, returned to it when the call ends; check error() (a
// MallocAsync code) before using data().
class Scratch {
 public:
  Scratch(cudaStream_t stream, size_t doubles) : stream_(stream) {
    error_ = MallocAsync(reinterpret_cast<void**>(&data_), doubles * sizeof(double), stream,
                         "attention statistics");
  }
  ~Scratch() {
    if (data_ != nullptr) CheckCuda(cudaFreeAsync(data_, stream_), "attention statistics");
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  int error() const { return error_; }
  double* data() const { return data_; }

 private:
  cudaStream_t stream_;
  int error_ = 0;
  double* data_ = nullptr;
};

// Runs the row pass and the column pass over `qs`: row statistics in row_max and row_z (2 *
// n_heads * rows doubles of scratch), the columns into sum, sumsq and entropy (device memory).
// Returns the launches' LaunchResult.
int RowsThenColumns(const OpContext& ctx, cudaStream_t stream, const Queries& qs,
                    const CacheSegment& keys, double scale, double* row_max, double* row_z,
                    bool window, int64_t prefix_end, double entropy_epsilon, double* sum,
                    double* sumsq, double* entropy) {
  const int64_t row_blocks = (qs.rows * qs.n_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  RowStatsKernel<<<static_cast<unsigned>(row_blocks), kWarpsPerBlock * kWarp, 0, stream>>>(
      qs, keys, scale, row_max, row_z);
  if (int e = LaunchResult(ctx, "attention statistics: rows"); e != 0) return e;
  const dim3 grid(static_cast<unsigned>((keys.length + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(qs.n_heads));
  ColumnKernel<<<grid, kColumnThreads, 0, stream>>>(
      qs, keys, scale, row_max, row_z, window, prefix_end, entropy_epsilon, sum, sumsq, entropy);
  return LaunchResult(ctx, "attention statistics: columns");
}

void ToHost(cudaStream_t stream, double* host, const double* device, int64_t count) {
  CheckCuda(cudaMemcpyAsync(host, device, static_cast<size_t>(count) * sizeof(double),
                            cudaMemcpyDeviceToHost, stream),
            "attention statistics to the host");
}

}  // namespace

int WindowAttentionStats(const OpContext& ctx, const float* q, int64_t w, int64_t n_heads,
                         const CacheSegment& keys, double scale, double entropy_epsilon,
                         double* host_sum, double* host_sumsq, double* host_entropy) {
  cudaStream_t stream = StreamOf(ctx);
  const int64_t n = keys.length, cells = n_heads * n;
  // [row_max | row_z] over (head, query), then [sum | sumsq | entropy] over (head, key).
  Scratch scratch(stream, static_cast<size_t>(2 * n_heads * w + 3 * cells));
  if (scratch.error() != 0) return scratch.error();
  double* row_max = scratch.data();
  double* row_z = row_max + n_heads * w;
  double* sum = row_z + n_heads * w;
  double* sumsq = sum + cells;
  double* entropy = sumsq + cells;
  const Queries qs{q, w, n_heads, n - w};
  if (int e = RowsThenColumns(ctx, stream, qs, keys, scale, row_max, row_z, /*window=*/true, n - w,
                              entropy_epsilon, sum, sumsq, entropy);
      e != 0) {
    return e;
  }
  std::vector<double> host_entropy_cells(static_cast<size_t>(cells));
  ToHost(stream, host_sum, sum, cells);
  ToHost(stream, host_sumsq, sumsq, cells);
  ToHost(stream, host_entropy_cells.data(), entropy, cells);
  CheckCuda(cudaStreamSynchronize(stream), "attention statistics");
  if (int e = LaunchResult(ctx, "attention statistics"); e != 0) return e;
  // Per head in key order, then over the heads in order (the CPU's per-head totals, added in
  // head order).
  double total = 0.0;
  for (int64_t h = 0; h < n_heads; ++h) {
    double head = 0.0;
    for (int64_t j = 0; j < n; ++j) head += host_entropy_cells[static_cast<size_t>(h * n + j)];
    total += head;
  }
  *host_entropy = total;
  return 0;
}

int AccumulatedAttention(const OpContext& ctx, const float* q, int64_t n_heads,
                         const CacheSegment& keys, double scale, double* host_accumulated) {
  cudaStream_t stream = StreamOf(ctx);
  const int64_t n = keys.length, kv_cells = keys.n_kv_heads * n;
  // [row_max | row_z | per_head] over (head, query or key), then [accumulated] over (group, key).
  Scratch scratch(stream, static_cast<size_t>(3 * n_heads * n + kv_cells));
  if (scratch.error() != 0) return scratch.error();
  double* row_max = scratch.data();
  double* row_z = row_max + n_heads * n;
  double* per_head = row_z + n_heads * n;
  double* accumulated = per_head + n_heads * n;
  const Queries qs{q, n, n_heads, 0};
  if (int e = RowsThenColumns(ctx, stream, qs, keys, scale, row_max, row_z, /*window=*/false, 0,
                              0.0, per_head, nullptr, nullptr);
      e != 0) {
    return e;
  }
  const int64_t blocks = (kv_cells + kColumnThreads - 1) / kColumnThreads;
  GroupSumKernel<<<static_cast<unsigned>(blocks), kColumnThreads, 0, stream>>>(
      per_head, n, keys.n_kv_heads, n_heads / keys.n_kv_heads, accumulated);
  if (int e = LaunchResult(ctx, "attention statistics: group sums"); e != 0) return e;
  ToHost(stream, host_accumulated, accumulated, kv_cells);
  CheckCuda(cudaStreamSynchronize(stream), "attention statistics");
  return LaunchResult(ctx, "attention statistics");
}

}  // namespace ripplekv::kernels::cuda
