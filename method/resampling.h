#pragma once
// The building blocks of the resampling statistics (paired comparisons, method/paired_stats.h;
// profile stability, method/profile_stability.h) and of rank normalization (method/budget_map.h):
// average ranks, Pearson's and Spearman's correlations, a seeded uniform index draw that is the
// same on every standard library, and the type-7 sample quantile.
//
// Pure and deterministic; no std:: distribution is used, since their output is
// implementation-defined. Thread-safety: no shared state (a BootstrapDraw belongs to one thread).

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ripplekv::method {

// Ranks 1..n of `values` in ascending order, equal values (compared exactly) sharing the mean of
// their ranks. `tie_term`, when given, receives sum_t (t^3 - t) over the groups of t equal values
// (0 without ties).
std::vector<double> AverageRanks(std::span<const double> values, double* tie_term = nullptr);

// Pearson's correlation of x and y, in [-1, 1]; 0 when either input is constant or holds fewer
// than 2 values. Precondition: x.size() == y.size().
double PearsonCorrelation(std::span<const double> x, std::span<const double> y);

// Spearman's rank correlation: Pearson's correlation of AverageRanks(x) and AverageRanks(y), in
// [-1, 1]. 0 when either input is constant (its ranks have no spread) or holds fewer than 2 values.
// Precondition: x.size() == y.size().
double SpearmanCorrelation(std::span<const double> x, std::span<const double> y);

// Indices drawn uniformly with replacement: one std::mt19937_64 seeded with `seed`; an index in
// [0, n) is x mod n for the first 64-bit output x >= 2^64 mod n, which is exactly uniform and the
// same on every standard library.
class BootstrapDraw {
 public:
  explicit BootstrapDraw(uint64_t seed) : engine_(seed) {}
  // One index in [0, n); n >= 1.
  uint64_t Index(uint64_t n);

 private:
  std::mt19937_64 engine_;
};

// The q-quantile of ascending `sorted` values by linear interpolation at h = (R - 1) q (Hyndman &
// Fan type 7, numpy's default): Q(q) = v_(floor h) + (h - floor h) (v_(floor h + 1) - v_(floor h)).
// Preconditions: sorted is non-empty and ascending, q in [0, 1].
double SortedQuantile(std::span<const double> sorted, double q);

}  // namespace ripplekv::method
