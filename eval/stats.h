#pragma once
// Means with Student-t confidence intervals, and the Student t distribution they need.
// Pure functions, thread-safe.

#include <cstdint>
#include <limits>
#include <span>

namespace ripplekv::eval {

// I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1 and a, b > 0 (continued
// fraction, relative accuracy ~1e-14). NaN outside that domain.
double RegularizedIncompleteBeta(double x, double a, double b);

// P(T <= t) for Student's t with `df` > 0 degrees of freedom (df need not be an integer).
// NaN when df <= 0 or an argument is NaN.
double StudentTCdf(double t, double df);

// The t with StudentTCdf(t, df) == p, for 0 < p < 1 and df > 0, found by bisection on the CDF to
// a relative precision of 1e-12. NaN outside that domain. E.g. StudentTQuantile(0.975, 10) is
// 2.2281.
double StudentTQuantile(double p, double df);

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sample summary with a two-sided confidence interval for the mean:
// mean ± t(1 - (1 - confidence) / 2, n - 1) * stddev / sqrt(n).
struct MeanCi {
  int64_t n = 0;
  double mean = kNaN;        // NaN when n == 0
  double stddev = kNaN;      // sample standard deviation (n - 1 denominator); NaN when n < 2
  double half_width = kNaN;  // NaN when n < 2 (no interval from one value)

  double low() const { return mean - half_width; }
  double high() const { return mean + half_width; }
};

// `confidence` in (0, 1), 0.95 for the tables; NaN half-width for any other value.
MeanCi MeanWithCi(std::span<const double> values, double confidence = 0.95);

}  // namespace ripplekv::eval
