#pragma once
// What the response benchmarks share (bench/response_additivity.cc, bench/response_per_head.cc):
// the samples of a text file or a built-in set at a calibration shape, a mean, a bootstrap
// interval and a wall-time clock.

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "method/calibration_params.h"
#include "method/resampling.h"
#include "worker/data/calibration_data.h"
#include "worker/engine/open_engine.h"

namespace ripplekv::bench {

// The samples of `data` (a built-in set's name, else a file) at `params`' shape, tokenized with
// the engine's tokenizer.
inline StatusOr<worker::CalibrationSet> LoadSamples(const std::string& data,
                                                    const worker::Engine& engine,
                                                    const method::CalibrationParams& params) {
  const worker::DataOptions options = worker::DataOptionsOf(params);
  if (worker::CheckBuiltinCalibrationName(data).ok()) {
    return worker::BuiltinCalibrationData(data, *engine.tokenizer, options);
  }
  return worker::LoadCalibrationData(data, *engine.tokenizer, options);
}

inline double Mean(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// Percentile bootstrap 95% interval of the mean of `v` (10000 resamples, std::mt19937_64 with a
// fixed seed and std::uniform_int_distribution: the numbers in docs/BUDGETS.md are libstdc++'s).
inline std::pair<double, double> BootstrapMeanInterval(const std::vector<double>& v) {
  constexpr int kResamples = 10000;
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  std::vector<double> means(kResamples);
  for (double& m : means) {
    double sum = 0.0;
    for (size_t i = 0; i < v.size(); ++i) sum += v[pick(rng)];
    m = sum / static_cast<double>(v.size());
  }
  std::sort(means.begin(), means.end());
  return {method::SortedQuantile(means, 0.025), method::SortedQuantile(means, 0.975)};
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace ripplekv::bench
