// Decode GEMV (one token) over weights kept in their stored GGML type: the fused
// dequantize-dot kernels (kernels/dequant/gemv.h) against the path they replace, which expands
// 128-row slices of W to fp32 and runs cblas_sgemv on each (as Linear over stored weights does),
// and against cblas_sgemv over a matrix already held in fp32. Counter GB/s = bytes of W as stored
// (the fp32 bytes for the fp32-resident line) per second, printed as GB=<n>/s.

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dequant/dequant.h"
#include "kernels/dequant/dequant_cpu.h"
#include "kernels/dequant/fp16.h"
#include "kernels/dequant/gemv.h"
#include "kernels/dequant/quantize.h"

namespace {

using namespace ripplekv::kernels;

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kF16};
constexpr int64_t kShapes[][2] = {{4096, 4096}, {576, 1536}, {65536, 2048}};  // [rows, cols]
constexpr int64_t kSlice = 128;                                // rows per expanded slice

struct Problem {
  GgmlType type;
  int64_t rows, cols, row_bytes;
  std::vector<uint8_t> w;
  std::vector<float> x, y;
};

// Normal weights quantized with quantize.h; q4_1 (which it cannot write) gets random nibbles
// with fp16 scales and minimums of the same size.
Problem MakeProblem(int64_t type_index, int64_t shape_index) {
  Problem p;
  p.type = kTypes[type_index];
  p.rows = kShapes[shape_index][0];
  p.cols = kShapes[shape_index][1];
  p.row_bytes = *GgmlBytes(p.type, p.cols);
  p.w.resize(static_cast<size_t>(p.rows * p.row_bytes));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  if (CanQuantize(p.type)) {
    std::vector<float> row(static_cast<size_t>(p.cols));
    for (int64_t r = 0; r < p.rows; ++r) {
      for (float& v : row) v = normal(rng);
      if (!QuantizeRow(p.type, row, std::span(p.w).subspan(r * p.row_bytes, p.row_bytes)).ok()) {
        std::abort();
      }
    }
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : p.w) b = static_cast<uint8_t>(byte(rng));
    const int64_t block_bytes = TraitsOf(p.type).block_bytes;
    for (size_t at = 0; at < p.w.size(); at += block_bytes) {
      const uint16_t d = FloatToHalf(0.01f), m = FloatToHalf(-0.08f);
      std::memcpy(&p.w[at], &d, 2);
      std::memcpy(&p.w[at + 2], &m, 2);
    }
  }
  p.x.resize(static_cast<size_t>(p.cols));
  for (float& v : p.x) v = normal(rng) * 20.0f;
  p.y.resize(static_cast<size_t>(p.rows));
  return p;
}

void Label(benchmark::State& state, const Problem& p, int64_t bytes) {
  state.SetLabel(std::string(TraitsOf(p.type).name) + " " + std::to_string(p.rows) + "x" +
                 std::to_string(p.cols));
  state.counters["GB"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}

// Args: type index, shape index, threads, implementation (0 auto, 1 scalar).
void BM_Fused(benchmark::State& state) {
  Problem p = MakeProblem(state.range(0), state.range(1));
  const GemvOptions options{.num_threads = static_cast<int>(state.range(2)),
                            .impl = state.range(3) == 0 ? GemvImpl::kAuto : GemvImpl::kScalar};
  for (auto _ : state) {
    if (!DequantGemv(options, p.type, p.w, p.rows, p.cols, p.x, p.y).ok()) {
      state.SkipWithError("DequantGemv failed");
    }
    benchmark::DoNotOptimize(p.y.data());
  }
  Label(state, p, static_cast<int64_t>(p.w.size()));
}

// Args: type index, shape index, threads.
void BM_ExpandThenSgemv(benchmark::State& state) {
  openblas_set_num_threads(1);
  Problem p = MakeProblem(state.range(0), state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const int64_t row_blocks = p.cols / TraitsOf(p.type).block_elements;
  const int64_t n_slices = (p.rows + kSlice - 1) / kSlice;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      thread_local std::vector<float> slice;
      slice.resize(static_cast<size_t>(kSlice * p.cols));
#pragma omp for schedule(dynamic, 1)
      for (int64_t s = 0; s < n_slices; ++s) {
        const int64_t r0 = s * kSlice, nr = std::min(kSlice, p.rows - r0);
        cpu::DequantizeBlocks(p.type, p.w.data() + r0 * p.row_bytes, nr * row_blocks, slice.data());
        cblas_sgemv(CblasRowMajor, CblasNoTrans, nr, p.cols, 1.0f, slice.data(), p.cols, p.x.data(),
                    1, 0.0f, p.y.data() + r0, 1);
      }
    }
    benchmark::DoNotOptimize(p.y.data());
  }
  Label(state, p, static_cast<int64_t>(p.w.size()));
}

// Args: shape index, threads. The weights already expanded to fp32 (4 bytes per weight).
void BM_Fp32Sgemv(benchmark::State& state) {
  openblas_set_num_threads(1);
  Problem p = MakeProblem(/*Q8_0*/ 2, state.range(0));
  std::vector<float> w(static_cast<size_t>(p.rows * p.cols));
  cpu::DequantizeRows(p.type, p.w.data(), p.rows, p.cols, w.data());
  const int threads = static_cast<int>(state.range(1));
  const int64_t n_slices = (p.rows + kSlice - 1) / kSlice;
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t s = 0; s < n_slices; ++s) {
      const int64_t r0 = s * kSlice, nr = std::min(kSlice, p.rows - r0);
      cblas_sgemv(CblasRowMajor, CblasNoTrans, nr, p.cols, 1.0f, w.data() + r0 * p.cols, p.cols,
                  p.x.data(), 1, 0.0f, p.y.data() + r0, 1);
    }
    benchmark::DoNotOptimize(p.y.data());
  }
  p.type = GgmlType::kF32;
  Label(state, p, static_cast<int64_t>(w.size() * sizeof(float)));
}

BENCHMARK(BM_Fused)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}, {1, 2}, {0}})
    ->ArgsProduct({{0, 1, 2, 3}, {0}, {1}, {1}})
    ->UseRealTime();
BENCHMARK(BM_ExpandThenSgemv)->ArgsProduct({{0, 1, 2, 3}, {0, 1}, {1, 2}})->UseRealTime();
BENCHMARK(BM_Fp32Sgemv)->ArgsProduct({{0, 1}, {1, 2}})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
