#include "method/response_allocation.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/check.h"
#include "base/strings.h"

namespace ripplekv::method {
namespace {

Status AllocationError(const std::string& message) {
  return absl::InvalidArgumentError(Cat("response allocation: ", message));
}

Status CurveError(const std::string& message) {
  return absl::InvalidArgumentError(Cat("response curve: ", message));
}

// One piece of a layer's lower convex hull: from `start` tokens, `length` more tokens change the
// hull's KL by `slope` nats per token.
struct HullSegment {
  size_t layer = 0;
  size_t order = 0;    // position in the layer's hull; slopes rise with it
  int64_t length = 0;  // tokens, > 0
  double slope = 0.0;  // nats per token
};

struct Point {
  int64_t budget;  // tokens
  double kl;       // nats
};

// True when `middle` is on or above the chord from `a` to `b` (a.budget < middle.budget <
// b.budget), so it is not a vertex of the lower hull. Cross-multiplied: no division.
bool OnOrAboveChord(const Point& a, const Point& middle, const Point& b) {
  return (middle.kl - a.kl) * static_cast<double>(b.budget - a.budget) >=
         (b.kl - a.kl) * static_cast<double>(middle.budget - a.budget);
}

// The lower convex hull of the curve at the integer budgets [lo, hi], as its vertices (Andrew's
// monotone chain). Past the curve's last grid point the curve is flat, so only the end of that
// stretch can be a vertex.
std::vector<Point> LowerHull(const ResponseCurve& curve, int64_t lo, int64_t hi) {
  const int64_t last_sampled = std::min(hi, std::max(lo, curve.budgets.back()));
  std::vector<Point> hull;
  auto push = [&hull](Point p) {
    while (hull.size() >= 2 && OnOrAboveChord(hull[hull.size() - 2], hull.back(), p)) {
      hull.pop_back();
    }
    hull.push_back(p);
  };
  for (int64_t b = lo; b <= last_sampled; ++b) {
    push({b, InterpolateResponse(curve, static_cast<double>(b))});
  }
  if (hi > last_sampled) push({hi, curve.kl.back()});
  return hull;
}

}  // namespace

Status ValidateResponseCurve(const ResponseCurve& curve) {
  if (curve.budgets.empty()) return CurveError("a curve has no points");
  if (curve.kl.size() != curve.budgets.size()) {
    return CurveError(
        Cat("a curve has ", curve.budgets.size(), " budgets but ", curve.kl.size(), " KL values"));
  }
  for (size_t i = 0; i < curve.budgets.size(); ++i) {
    const int64_t b = curve.budgets[i];
    if (b < 1) return CurveError(Cat("point ", i, ": budget ", b, " < 1"));
    if (i > 0 && b <= curve.budgets[i - 1]) {
      return CurveError(
          Cat("point ", i, ": budget ", b, " does not rise above ", curve.budgets[i - 1]));
    }
    if (!std::isfinite(curve.kl[i]) || curve.kl[i] < 0.0) {
      return CurveError(
          Cat("point ", i, " (budget ", b, "): KL ", curve.kl[i], " is not a finite value >= 0"));
    }
  }
  return absl::OkStatus();
}

double InterpolateResponse(const ResponseCurve& curve, double budget) {
  const auto& g = curve.budgets;
  const auto& kl = curve.kl;
  const double g0 = static_cast<double>(g.front());
  if (budget <= g0) {
    if (g.size() == 1) return kl.front();
    const double slope = (kl[1] - kl[0]) / std::log(static_cast<double>(g[1]) / g0);
    return std::max(kl[0], kl[0] + slope * std::log(budget / g0));
  }
  if (budget >= static_cast<double>(g.back())) return kl.back();
  // g[i] < budget < g[i + 1] (or == g[i]).
  const size_t i = static_cast<size_t>(
      std::upper_bound(g.begin(), g.end(), budget,
                       [](double b, int64_t point) { return b < static_cast<double>(point); }) -
      g.begin() - 1);
  const double lo = static_cast<double>(g[i]);
  const double t = std::log(budget / lo) / std::log(static_cast<double>(g[i + 1]) / lo);
  return kl[i] + (kl[i + 1] - kl[i]) * t;
}

StatusOr<ResponseAllocation> AllocateByResponse(std::span<const ResponseCurve> curves,
                                                int64_t total, ApportionBounds bounds) {
  const size_t L = curves.size();
  if (L == 0) return AllocationError("no layers");
  for (size_t l = 0; l < L; ++l) {
    if (Status s = ValidateResponseCurve(curves[l]); !s.ok()) {
      return AllocationError(Cat("layer ", l, ": ", std::string(s.message())));
    }
  }
  const int64_t lo = bounds.min_tokens;
  if (lo < 1) return AllocationError(Cat("min_tokens ", lo, " < 1"));
  if (bounds.max_tokens && *bounds.max_tokens < lo) {
    return AllocationError(Cat("max_tokens ", *bounds.max_tokens, " < min_tokens ", lo));
  }
  if (total < 0 || total > kMaxApportionTotal) {
    return AllocationError(Cat("total ", total, " outside [0, ", kMaxApportionTotal, "]"));
  }
  const auto layers = static_cast<int64_t>(L);
  // lo <= total and hi < total are checked first, so the products cannot overflow.
  if (lo > total || layers * lo > total ||
      (bounds.max_tokens && *bounds.max_tokens < total && layers * *bounds.max_tokens < total)) {
    return AllocationError(Cat("total ", total, " outside [", layers, " * ", lo, ", ", layers,
                               " * ", bounds.max_tokens ? Cat(*bounds.max_tokens) : "unbounded",
                               "]"));
  }
  // Unbounded: no layer can hold more than what the others' minimums leave.
  const int64_t hi = bounds.max_tokens ? *bounds.max_tokens : total - (layers - 1) * lo;

  ResponseAllocation out;
  out.tokens.assign(L, lo);
  std::vector<HullSegment> segments;
  for (size_t l = 0; l < L; ++l) {
    const std::vector<Point> hull = LowerHull(curves[l], lo, hi);
    out.hull_kl += hull.front().kl;
    double previous_slope = -INFINITY;
    for (size_t k = 0; k + 1 < hull.size(); ++k) {
      const int64_t length = hull[k + 1].budget - hull[k].budget;
      // Convex by construction; the max keeps division's rounding from reordering the slopes.
      previous_slope =
          std::max(previous_slope, (hull[k + 1].kl - hull[k].kl) / static_cast<double>(length));
      segments.push_back({.layer = l, .order = k, .length = length, .slope = previous_slope});
    }
  }
  // Steepest first; a layer's own slopes rise with `order`, so each layer takes a prefix.
  std::sort(segments.begin(), segments.end(), [](const HullSegment& a, const HullSegment& b) {
    return std::tie(a.slope, a.layer, a.order) < std::tie(b.slope, b.layer, b.order);
  });
  int64_t left = total - layers * lo;
  for (const HullSegment& s : segments) {
    if (left == 0) break;
    const int64_t take = std::min(left, s.length);
    out.tokens[s.layer] += take;
    out.hull_kl += s.slope * static_cast<double>(take);
    left -= take;
  }
  RIPPLEKV_CHECK(left == 0);  // L * hi >= total and each layer's hull spans [lo, hi]
  for (size_t l = 0; l < L; ++l) {
    out.predicted_kl += InterpolateResponse(curves[l], static_cast<double>(out.tokens[l]));
  }
  return out;
}

}  // namespace ripplekv::method
