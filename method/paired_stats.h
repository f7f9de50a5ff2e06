#pragma once
// Paired comparison statistics for two methods scored on the same examples (docs/EVAL.md,
// "Comparing two methods"): the exact sign test (McNemar's test for binary scores), the Wilcoxon
// signed-rank test, a seeded paired bootstrap interval of the mean difference, the Holm-Bonferroni
// correction, and effect sizes.
//
// Every function is pure and deterministic: the same input (and, for the bootstrap, the same seed)
// gives the same bits on every platform; no std:: distribution is used, since their output is
// implementation-defined. Thread-safety: no shared state.
//
// "Differences" are per-pair differences d_i = x_i - y_i, oriented by the caller (the command
// flips lower-is-better scores so that d > 0 always favours the first method).

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ripplekv::method {

// Largest number of pairs for which the Wilcoxon test uses its exact null distribution.
inline constexpr int64_t kWilcoxonExactMaxPairs = 50;

// Exact two-sided sign test: with `wins` pairs favouring the first method and `losses` favouring
// the second (ties already dropped), n = wins + losses and X ~ Binomial(n, 1/2),
//   p = min(1, 2 * P(X <= min(wins, losses))),   p = 1 when n = 0.
// On binary outcomes this is the exact McNemar test (wins and losses are its discordant pairs).
// Computed with exact integer binomial sums for n <= 60 (rounded once, to the nearest double), and
// above that as exp(log C(n, m) - n log 2) (lgamma) times the sum of the term ratios
// C(n, k-1) / C(n, k) = k / (n - k + 1), summed downwards from k = m = min(wins, losses). The log
// carries an absolute error of about n * 1e-16, so p has a relative error of about 1e-12 at
// n = 10^4 (1e-10 at 10^6). Precondition (CHECK): wins >= 0, losses >= 0, wins + losses <= 10^9.
[[nodiscard]] double SignTestPValue(int64_t wins, int64_t losses);

struct WilcoxonResult {
  double w_plus = 0.0;   // sum of the ranks of |d| over positive d
  double w_minus = 0.0;  // sum of the ranks of |d| over negative d; w_plus + w_minus = n(n+1)/2
  int64_t n = 0;         // pairs used: the non-zero differences
  double p_value = 1.0;  // two-sided; 1 when n = 0
  bool exact = false;    // true: exact null distribution; false: normal approximation
};

// Wilcoxon signed-rank test, two-sided, of "the differences are symmetric about 0". Zero
// differences are dropped (Wilcoxon's convention, scipy's zero_method="wilcox"); the remaining
// |d_i| are ranked 1..n, equal values (compared exactly) sharing the average of their ranks.
//   * n <= kWilcoxonExactMaxPairs and no tied |d|: exact. Under the null every sign pattern of the
//     ranks 1..n is equally likely, so P(W+ = s) = c_n(s) / 2^n with c_n(s) the number of subsets
//     of {1..n} summing to s (dynamic programming over rank sums, c_k(s) = c_{k-1}(s) + c_{k-1}(s -
//     k), in exact integers), and p = min(1, 2 * P(W+ <= min(W+, W-))) (the null is symmetric, so
//     this is the two-sided tail of whichever side W+ lies on).
//   * otherwise the normal approximation with tie and continuity corrections:
//       mean = n(n+1)/4,  var = n(n+1)(2n+1)/24 - sum_t (t^3 - t)/48  (t: size of each tie group),
//       z = max(0, |W+ - mean| - 1/2) / sqrt(var),  p = erfc(z / sqrt(2)) = 2 * (1 - Phi(z)).
// Errors: InvalidArgument when a difference is not finite (naming its index).
[[nodiscard]] StatusOr<WilcoxonResult> WilcoxonSignedRank(std::span<const double> differences);

struct BootstrapOptions {
  int64_t resamples = 10000;  // bootstrap replicates, >= 1
  uint64_t seed = 0;          // seed of the std::mt19937_64 that draws the resamples
  double alpha = 0.05;        // the interval's level is 1 - alpha; in (0, 1)
};

struct Interval {
  double low = 0.0;
  double high = 0.0;
};

// Paired bootstrap percentile interval of the mean difference. Each replicate draws n indices
// uniformly with replacement from the n pairs (one std::mt19937_64 seeded with `seed`; an index is
// x mod n for the first 64-bit output x >= 2^64 mod n, which is exactly uniform and the same on
// every standard library) and takes the mean of those differences. The interval is the alpha/2 and
// 1 - alpha/2 quantiles of the sorted replicate means m_(0) <= ... <= m_(R-1), each by linear
// interpolation at h = (R - 1) q (Hyndman & Fan type 7, numpy's default):
//   Q(q) = m_(floor h) + (h - floor h) * (m_(floor h + 1) - m_(floor h)).
// Deterministic for a seed. Errors (InvalidArgument): no differences, a difference that is not
// finite, resamples < 1, alpha outside (0, 1).
[[nodiscard]] StatusOr<Interval> PairedBootstrapInterval(std::span<const double> differences,
                                                         const BootstrapOptions& options);

// Holm-Bonferroni step-down adjustment of m p-values: with p_(1) <= ... <= p_(m) sorted ascending
// (equal values keep their input order),
//   adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j)),
// returned in the input order. Rejecting every hypothesis with adj < alpha controls the
// family-wise error rate at alpha under any dependence. Adjusted values are monotone in the
// p-values and never below them. Errors: InvalidArgument when a p-value is outside [0, 1] or not
// a number (naming its index). An empty input gives an empty output.
[[nodiscard]] StatusOr<std::vector<double>> HolmAdjust(std::span<const double> p_values);

// The mean of the differences, sum d_i / n; 0 for none.
[[nodiscard]] double MeanDifference(std::span<const double> differences);

// Cohen's d_z for paired data: mean(d) / sd(d), sd with n - 1 in the denominator. 0 when n < 2 or
// sd = 0, i.e. all differences are equal (checked exactly, so rounding in the mean cannot turn
// zero spread into a huge d_z): the standardized effect is undefined there, and the mean
// difference says what there is to say.
[[nodiscard]] double CohenDz(std::span<const double> differences);

// Matched-pairs rank-biserial correlation (Kerby 2014): r = (W+ - W-) / (W+ + W-), in [-1, 1]:
// the share of the rank sum favouring the first method minus the share favouring the second.
// 0 when every difference is zero.
[[nodiscard]] double RankBiserial(const WilcoxonResult& wilcoxon);

}  // namespace ripplekv::method
