#include "eval/stats.h"

#include <cmath>

namespace ripplekv::eval {
namespace {

// Continued fraction for I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double x, double a, double b) {
  constexpr int kMaxIterations = 10000;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    // Even step.
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    // Odd step.
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEpsilon) break;
  }
  return h;
}

}  // namespace

double RegularizedIncompleteBeta(double x, double a, double b) {
  if (!(x >= 0.0 && x <= 1.0) || !(a > 0.0) || !(b > 0.0)) return kNaN;
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  // lgamma is only read here, never its sign (glibc's lgamma is thread-safe apart from signgam).
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * BetaContinuedFraction(x, a, b) / a;
  return 1.0 - front * BetaContinuedFraction(1.0 - x, b, a) / b;
}

double StudentTCdf(double t, double df) {
  if (std::isnan(t) || !(df > 0.0)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  // P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
  const double x = df / (df + t * t);
  const double tail = 0.5 * RegularizedIncompleteBeta(x, 0.5 * df, 0.5);
  return t > 0 ? 1.0 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df > 0.0)) return kNaN;
  if (p == 0.5) return 0.0;
  if (p < 0.5) return -StudentTQuantile(1.0 - p, df);
  double lo = 0.0;
  double hi = 1.0;
  for (int i = 0; i < 2000 && StudentTCdf(hi, df) < p; ++i) {
    lo = hi;
    hi *= 2.0;
    if (std::isinf(hi)) return hi;
  }
  for (int i = 0; i < 400 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (StudentTCdf(mid, df) < p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

MeanCi MeanWithCi(std::span<const double> values, double confidence) {
  MeanCi out;
  out.n = static_cast<int64_t>(values.size());
  if (values.empty()) return out;
  double sum = 0.0;
  for (double v : values) sum += v;
  const double n = static_cast<double>(values.size());
  out.mean = sum / n;
  if (values.size() < 2) return out;
  double squares = 0.0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  out.stddev = std::sqrt(squares / (n - 1.0));
  if (!(confidence > 0.0 && confidence < 1.0)) return out;
  const double t = StudentTQuantile(1.0 - (1.0 - confidence) / 2.0, n - 1.0);
  out.half_width = t * out.stddev / std::sqrt(n);
  return out;
}

}  // namespace ripplekv::eval
