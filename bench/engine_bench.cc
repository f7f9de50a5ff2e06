// Prefill and decode throughput of the RippleKV engine on a real model.
//   engine_bench --model PATH [--threads N] [benchmark flags]
// Reported counter: tok_s (tokens per second). bench/compare_engines.py runs this next to
// llama.cpp on the same model and threads.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "worker/engine/open_engine.h"

namespace {

using ripplekv::worker::ForwardRequest;
using ripplekv::worker::KvCache;
using ripplekv::worker::LogitRows;
using ripplekv::worker::Transformer;

const ripplekv::worker::Engine* g_loaded = nullptr;  // set once in main before any benchmark runs

// Deterministic token ids spread over the vocabulary (content does not change the cost).
std::vector<int32_t> PromptTokens(int n, int vocab) {
  std::vector<int32_t> t(n);
  uint64_t s = 88172645463325252ull;
  for (int i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    t[i] = static_cast<int32_t>(s % vocab);
  }
  return t;
}

void BM_Prefill(benchmark::State& state) {
  const Transformer& t = *g_loaded->transformer;
  const int n = static_cast<int>(state.range(0));
  const auto tokens = PromptTokens(n, t.config().vocab_size);
  KvCache cache(t.config(), n);
  for (auto _ : state) {
    cache.Clear();
    auto out = t.Forward({.tokens = tokens, .logits = LogitRows::kLast}, cache);
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["tok_s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state) {
  const Transformer& t = *g_loaded->transformer;
  const int prompt = 512, steps = static_cast<int>(state.range(0));
  const auto tokens = PromptTokens(prompt + steps, t.config().vocab_size);
  KvCache cache(t.config(), prompt + steps);
  for (auto _ : state) {
    state.PauseTiming();
    cache.Clear();
    auto pre =
        t.Forward({.tokens = std::span(tokens).first(prompt), .logits = LogitRows::kNone}, cache);
    if (!pre.ok()) state.SkipWithError(std::string(pre.status().message()).c_str());
    state.ResumeTiming();
    for (int i = 0; i < steps; ++i) {
      auto out = t.Forward({.tokens = std::span(tokens).subspan(prompt + i, 1)}, cache);
      benchmark::DoNotOptimize(out);
    }
  }
  state.counters["tok_s"] =
      benchmark::Counter(steps, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Prefill)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);
BENCHMARK(BM_Decode)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int threads = 1;
  std::string weights = "stored";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      model_path = argv[++i];
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--weights") == 0 && i + 1 < argc) {
      weights = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr,
                 "usage: engine_bench --model PATH [--threads N] [--weights stored|f32] "
                 "[benchmark flags]\n");
    return 2;
  }
  auto opened =
      ripplekv::worker::OpenEngine(model_path, {.weights = weights, .num_threads = threads});
  if (!opened.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", std::string(opened.status().message()).c_str());
    return 1;
  }
  g_loaded = opened->get();
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("model", model_path);
  benchmark::AddCustomContext("weights", weights);
  int bargc = static_cast<int>(rest.size());
  benchmark::Initialize(&bargc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
