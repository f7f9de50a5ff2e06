// Block dequantization (kernels/dequant/dequant_cpu.h): the portable decoders against the AVX2 +
// F16C ones, expanding a 128 x 4096 slice the way Linear over stored weights does
// (Weight::ExpandRows: one DequantizeBlocks call per row). Single thread. Counter per_value = CPU
// seconds per decoded value (CPU time, so that a loaded machine's waits do not count).

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequant/dequant.h"
#include "kernels/dequant/dequant_cpu.h"
#include "kernels/dequant/fp16.h"
#include "tests/kernels/ggml_blocks.h"

namespace {

using namespace ripplekv::kernels;

constexpr int64_t kRows = 128, kCols = 4096;

// Random quants with small finite fp16 scales; F16/BF16 get normal values (no NaN, which the AVX2
// F16 decoder sends to its slow path).
std::vector<uint8_t> MakeSlice(GgmlType type) {
  const GgmlTypeTraits traits = TraitsOf(type);
  const int64_t bytes = kRows * *GgmlBytes(type, kCols);
  std::vector<uint8_t> w(static_cast<size_t>(bytes));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  if (traits.block_elements == 1) {
    for (int64_t i = 0; i < bytes / traits.block_bytes; ++i) {
      const float v = normal(rng);
      if (type == GgmlType::kF32) {
        std::memcpy(&w[4 * i], &v, 4);
      } else {
        const uint16_t h = type == GgmlType::kF16 ? FloatToHalf(v) : FloatToBf16(v);
        std::memcpy(&w[2 * i], &h, 2);
      }
    }
    return w;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  for (int64_t at = 0; at < bytes; at += traits.block_bytes) {
    for (int offset : ScaleOffsets(type)) {
      const uint16_t h = FloatToHalf(normal(rng) * 0.1f);
      std::memcpy(&w[at + offset], &h, 2);
    }
  }
  return w;
}

// Args: type index, implementation (0 scalar, 1 AVX2).
void BM_Dequantize(benchmark::State& state) {
  const GgmlType type = kGgmlTypes[state.range(0)];
  const bool avx2 = state.range(1) == 1;
  state.SetLabel(std::string(TraitsOf(type).name) + (avx2 ? " avx2" : " scalar"));
  if (avx2 && !cpu::DequantAvx2Supported()) {
    state.SkipWithError("this CPU lacks AVX2/F16C");
    return;
  }
  const std::vector<uint8_t> w = MakeSlice(type);
  std::vector<float> out(static_cast<size_t>(kRows * kCols));
  const int64_t row_bytes = *GgmlBytes(type, kCols);
  const int64_t row_blocks = kCols / TraitsOf(type).block_elements;
  const auto decode = avx2 ? cpu::DequantizeBlocksAvx2 : cpu::DequantizeBlocksScalar;
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      decode(type, w.data() + r * row_bytes, row_blocks, out.data() + r * kCols);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Values per CPU second, inverted: CPU seconds per value (printed with an SI prefix, e.g.
  // 110p = 0.11 ns).
  state.counters["per_value"] = benchmark::Counter(
      static_cast<double>(kRows * kCols),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_Dequantize)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {0, 1}});

}  // namespace

BENCHMARK_MAIN();
