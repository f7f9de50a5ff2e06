#include "method/resampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ripplekv::method {

std::vector<double> AverageRanks(std::span<const double> values, double* tie_term) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  double ties = 0.0;
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    // Ranks start + 1 .. end share their mean.
    const double rank = 0.5 * static_cast<double>(start + 1 + end);
    for (size_t i = start; i < end; ++i) ranks[order[i]] = rank;
    const double t = static_cast<double>(end - start);
    ties += t * t * t - t;
    start = end;
  }
  if (tie_term != nullptr) *tie_term = ties;
  return ranks;
}

double PearsonCorrelation(std::span<const double> x, std::span<const double> y) {
  if (x.size() < 2 || x.size() != y.size()) return 0.0;
  double mx = 0.0, my = 0.0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(x.size());
  my /= static_cast<double>(y.size());
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (!(sxx > 0.0) || !(syy > 0.0)) return 0.0;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

double SpearmanCorrelation(std::span<const double> x, std::span<const double> y) {
  if (x.size() < 2 || x.size() != y.size()) return 0.0;
  return PearsonCorrelation(AverageRanks(x), AverageRanks(y));
}

uint64_t BootstrapDraw::Index(uint64_t n) {
  // Outputs below 2^64 mod n are rejected, so x mod n is exactly uniform on [0, n).
  const uint64_t reject_below = (uint64_t{0} - n) % n;
  uint64_t x = engine_();
  while (x < reject_below) x = engine_();
  return x % n;
}

double SortedQuantile(std::span<const double> sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

}  // namespace ripplekv::method
