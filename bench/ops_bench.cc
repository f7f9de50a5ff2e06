// Microbenchmarks of the CPU ops at SmolLM2-135M shapes (d_model 576, 9 heads / 3 KV heads of 64,
// d_ff 1536). Counter GFLOPS = useful floating-point operations per second.

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/linear.h"

namespace {

using namespace ripplekv::kernels;

Tensor Random(Shape shape) {
  Tensor t(std::move(shape));
  std::mt19937 rng(1);
  std::normal_distribution<float> n;
  for (float& v : t.span()) v = n(rng);
  return t;
}

void BM_LinearFfnUp(benchmark::State& state) {
  const int64_t m = state.range(0), k = 576, n = 1536;
  const int threads = static_cast<int>(state.range(1));
  Tensor x = Random({m, k}), w = Random({n, k}), y({m, n});
  for (auto _ : state) {
    if (!Linear({.num_threads = threads}, x.view(), w.view(), {}, y.view()).ok()) {
      state.SkipWithError("Linear failed");
    }
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

void BM_CausalAttention(benchmark::State& state) {
  const int64_t m = state.range(0), hq = 9, hkv = 3, d = 64;
  const int threads = static_cast<int>(state.range(1));
  Tensor q = Random({m, hq, d}), k = Random({hkv, m, d}), v = Random({hkv, m, d}), out({m, hq, d});
  std::vector<int32_t> pos(hkv * m), qpos(m);
  for (int64_t i = 0; i < m; ++i) {
    qpos[i] = static_cast<int32_t>(i);
    for (int64_t h = 0; h < hkv; ++h) pos[h * m + i] = static_cast<int32_t>(i);
  }
  KvCacheView cache{k.data(), v.data(), pos.data(), static_cast<int>(hkv), static_cast<int>(m),
                    static_cast<int>(m), static_cast<int>(d)};
  for (auto _ : state) {
    if (!CausalAttention({.num_threads = threads}, q.view(), qpos, cache, 0.125f, out.view()).ok()) {
      state.SkipWithError("attention failed");
    }
  }
  // Causal: about half of QK^T and PV is needed.
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * 2.0 * hq * m * m * d / 2, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

BENCHMARK(BM_LinearFfnUp)->ArgsProduct({{1, 512, 2048}, {1, 2}})->UseRealTime();
BENCHMARK(BM_CausalAttention)->ArgsProduct({{512, 2048}, {1, 2}})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
