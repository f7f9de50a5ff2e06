#include "method/response_allocation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

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

StatusOr<std::vector<ResponseCurve>> ResponseCurves(const SensitivityProfile& profile) {
  if (profile.params.objective != Objective::kResponse) {
    return absl::FailedPreconditionError(Cat("profile measured objective ",
                                             ObjectiveName(profile.params.objective),
                                             "; response allocation needs a response profile"));
  }
  RETURN_IF_ERROR(ValidateProfile(profile));
  // ValidateProfile() guarantees strictly ascending layers in [0, n_layers), so full coverage is
  // layers[i].layer == i for every i < n_layers.
  std::vector<ResponseCurve> curves;
  curves.reserve(profile.layers.size());
  for (int64_t l = 0; l < profile.model.n_layers; ++l) {
    if (l >= static_cast<int64_t>(profile.layers.size()) || profile.layers[l].layer != l) {
      return AllocationError(Cat("the profile has no response for layer ", l, " of ",
                                 profile.model.n_layers,
                                 "; an allocation needs every layer measured"));
    }
    const std::vector<ResponsePoint>& points = profile.layers[l].response;
    if (points.empty()) {
      return AllocationError(Cat("layer ", l, " of the profile has no response points"));
    }
    ResponseCurve curve;
    for (const ResponsePoint& point : points) {
      curve.budgets.push_back(point.budget);
      curve.kl.push_back(point.mean_kl);
    }
    if (Status s = ValidateResponseCurve(curve); !s.ok()) {
      return AllocationError(Cat("layer ", l, ": ", std::string(s.message())));
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

StatusOr<std::vector<std::vector<ResponseCurve>>> HeadResponseCurves(
    const SensitivityProfile& profile) {
  ASSIGN_OR_RETURN(std::vector<ResponseCurve> layers, ResponseCurves(profile));
  if (profile.params.kv_heads == 0) {
    return absl::FailedPreconditionError(
        "budgets per KV head need a per-head response profile (`ripplekv calibrate --objective "
        "response --per-head`); this profile measured each layer as a whole");
  }
  std::vector<std::vector<ResponseCurve>> curves(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::vector<std::vector<ResponsePoint>>& heads = profile.layers[l].head_response;
    for (size_t h = 0; h < heads.size(); ++h) {
      ResponseCurve curve;
      for (const ResponsePoint& point : heads[h]) {
        curve.budgets.push_back(point.budget);
        curve.kl.push_back(point.mean_kl);
      }
      if (Status s = ValidateResponseCurve(curve); !s.ok()) {
        return AllocationError(Cat("layer ", l, " KV head ", h, ": ", std::string(s.message())));
      }
      curves[l].push_back(std::move(curve));
    }
  }
  return curves;
}

StatusOr<AllocationCurves> AllocationCurvesOf(const SensitivityProfile& profile, bool per_head) {
  AllocationCurves out;
  if (!per_head) {
    ASSIGN_OR_RETURN(out.curves, ResponseCurves(profile));
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<std::vector<ResponseCurve>> layers, HeadResponseCurves(profile));
  out.heads = layers.front().size();
  for (std::vector<ResponseCurve>& heads : layers) {
    for (ResponseCurve& curve : heads) out.curves.push_back(std::move(curve));
  }
  return out;
}

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

StatusOr<ResponseAllocator> ResponseAllocator::Create(std::span<const ResponseCurve> curves,
                                                      ApportionBounds bounds) {
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
  if (lo > kMaxApportionTotal) {
    return AllocationError(Cat("min_tokens ", lo, " > ", kMaxApportionTotal));
  }
  ResponseAllocator out;
  out.curves_.assign(curves.begin(), curves.end());
  out.bounds_ = bounds;
  for (size_t l = 0; l < L; ++l) {
    std::vector<Point> hull;
    bool rises_after = false;
    if (bounds.max_tokens) {
      hull = LowerHull(curves[l], lo, *bounds.max_tokens);
    } else {
      // Unbounded: the limit of the hull over [lo, hi] as hi grows. The flat stretch past the
      // full cache pulls the last segment down to slope 0, so the hull ends at its lowest vertex
      // and stays there.
      hull = LowerHull(curves[l], lo, std::max(lo, curves[l].budgets.back()));
      size_t lowest = 0;
      while (lowest + 1 < hull.size() && hull[lowest + 1].kl < hull[lowest].kl) ++lowest;
      hull.resize(lowest + 1);
      hull.push_back({hull.back().budget + kMaxApportionTotal, hull.back().kl});
      rises_after = hull.back().kl < curves[l].kl.back();
    }
    out.base_hull_kl_ += hull.front().kl;
    double previous_slope = -INFINITY;
    for (size_t k = 0; k + 1 < hull.size(); ++k) {
      const int64_t length = hull[k + 1].budget - hull[k].budget;
      // Convex by construction; the max keeps division's rounding from reordering the slopes.
      previous_slope =
          std::max(previous_slope, (hull[k + 1].kl - hull[k].kl) / static_cast<double>(length));
      out.segments_.push_back({.layer = l,
                               .order = k,
                               .length = length,
                               .slope = previous_slope,
                               .rises_after = rises_after && k + 2 == hull.size()});
    }
  }
  // Steepest first; a layer's own slopes rise with `order` (a tail that rises after is its last
  // segment), so each layer takes a prefix.
  std::sort(out.segments_.begin(), out.segments_.end(),
            [](const HullSegment& a, const HullSegment& b) {
              return std::tie(a.slope, a.rises_after, a.layer, a.order) <
                     std::tie(b.slope, b.rises_after, b.layer, b.order);
            });
  return out;
}

Status ResponseAllocator::CheckTotal(int64_t total) const {
  const auto layers = static_cast<int64_t>(curves_.size());
  const int64_t lo = bounds_.min_tokens;
  const std::optional<int64_t> hi = bounds_.max_tokens;
  // lo <= total and hi < total are checked first, so the products cannot overflow.
  if (total < 0 || total > kMaxApportionTotal || lo > total || layers * lo > total ||
      (hi && *hi < total && layers * *hi < total)) {
    return AllocationError(Cat("total ", total, " outside [", layers, " * ", lo, ", ", layers,
                               " * ", hi ? Cat(*hi) : "unbounded", "] (at most ",
                               kMaxApportionTotal, ")"));
  }
  return absl::OkStatus();
}

void ResponseAllocator::Finish(ResponseAllocation& out) const {
  out.predicted_kl = 0.0;
  for (size_t l = 0; l < curves_.size(); ++l) {
    out.predicted_kl += InterpolateResponse(curves_[l], static_cast<double>(out.tokens[l]));
  }
  // A hull lies on or below its curve and above 0: the clamp removes only the rounding of the
  // sum of slope * tokens (which otherwise leaves a bound of 1e-16 over a predicted 0).
  out.hull_kl = std::clamp(out.hull_kl, 0.0, out.predicted_kl);
}

StatusOr<ResponseAllocation> ResponseAllocator::Allocate(int64_t total) const {
  RETURN_IF_ERROR(CheckTotal(total));
  const auto layers = static_cast<int64_t>(curves_.size());
  ResponseAllocation out;
  out.tokens.assign(curves_.size(), bounds_.min_tokens);
  out.hull_kl = base_hull_kl_;
  int64_t left = total - layers * bounds_.min_tokens;
  for (const HullSegment& s : segments_) {
    if (left == 0) break;
    const int64_t take = std::min(left, s.length);
    out.tokens[s.layer] += take;
    out.hull_kl += s.slope * static_cast<double>(take);
    left -= take;
  }
  RIPPLEKV_CHECK(left == 0);  // each layer's hull spans [lo, hi], and L * hi >= total
  Finish(out);
  return out;
}

Status ResponseAllocator::ForEachAverage(
    int64_t first, int64_t last,
    const std::function<bool(int64_t average, const ResponseAllocation& allocation)>& visit) const {
  if (last < first) {
    return AllocationError(Cat("average budgets from ", first, " to ", last, " (none)"));
  }
  const auto layers = static_cast<int64_t>(curves_.size());
  if (first < 0 || last > kMaxApportionTotal / layers) {
    return AllocationError(Cat("average budgets [", first, ", ", last, "] outside [0, ",
                               kMaxApportionTotal / layers, "]"));
  }
  RETURN_IF_ERROR(CheckTotal(layers * first));
  RETURN_IF_ERROR(CheckTotal(layers * last));
  // The whole segments taken so far, as Allocate() takes them: the allocation of any larger
  // total starts with the same ones, in the same order, so the sums are the same bit for bit.
  std::vector<int64_t> tokens(curves_.size(), bounds_.min_tokens);
  double hull = base_hull_kl_;
  int64_t taken = 0;  // tokens above L * lo in the whole segments
  size_t next = 0;    // the first segment not wholly taken
  for (int64_t average = first; average <= last; ++average) {
    const int64_t extra = layers * (average - bounds_.min_tokens);
    while (next < segments_.size() && taken + segments_[next].length <= extra) {
      const HullSegment& s = segments_[next++];
      tokens[s.layer] += s.length;
      hull += s.slope * static_cast<double>(s.length);
      taken += s.length;
    }
    ResponseAllocation out{.tokens = tokens, .hull_kl = hull};
    if (extra > taken) {
      RIPPLEKV_CHECK(next < segments_.size());  // as in Allocate()
      const HullSegment& s = segments_[next];
      out.tokens[s.layer] += extra - taken;
      out.hull_kl += s.slope * static_cast<double>(extra - taken);
    }
    Finish(out);
    if (!visit(average, out)) break;
  }
  return absl::OkStatus();
}

StatusOr<ResponseAllocation> AllocateByResponse(std::span<const ResponseCurve> curves,
                                                int64_t total, ApportionBounds bounds) {
  ASSIGN_OR_RETURN(const ResponseAllocator allocator, ResponseAllocator::Create(curves, bounds));
  return allocator.Allocate(total);
}

namespace {

// The optimal map of `layers` x `average` tokens as a frontier point.
StatusOr<FrontierPoint> PointAt(const ResponseAllocator& allocator, int64_t layers,
                                int64_t average) {
  ASSIGN_OR_RETURN(ResponseAllocation map, allocator.Allocate(average * layers));
  return FrontierPoint{.average_tokens = average,
                       .predicted_kl = map.predicted_kl,
                       .hull_kl = map.hull_kl,
                       .tokens = std::move(map.tokens)};
}

}  // namespace

StatusOr<std::vector<FrontierPoint>> ResponseFrontier(std::span<const ResponseCurve> curves,
                                                      std::span<const int64_t> averages,
                                                      ApportionBounds bounds) {
  ASSIGN_OR_RETURN(const ResponseAllocator allocator, ResponseAllocator::Create(curves, bounds));
  const auto layers = static_cast<int64_t>(curves.size());
  std::vector<FrontierPoint> out;
  for (int64_t average : averages) {
    if (average < 1 || average > kMaxApportionTotal / layers) {
      return AllocationError(
          Cat("average budget ", average, " outside [1, ", kMaxApportionTotal / layers, "]"));
    }
    ASSIGN_OR_RETURN(FrontierPoint point, PointAt(allocator, layers, average));
    out.push_back(std::move(point));
  }
  return out;
}

StatusOr<FrontierPoint> SmallestAverageForKl(std::span<const ResponseCurve> curves, double max_kl,
                                             ApportionBounds bounds) {
  if (!std::isfinite(max_kl) || max_kl < 0.0) {
    return AllocationError(Cat("max KL ", max_kl, " is not a finite value >= 0"));
  }
  ASSIGN_OR_RETURN(const ResponseAllocator allocator, ResponseAllocator::Create(curves, bounds));
  // Past every layer's full cache (or at the upper bound) more memory changes nothing.
  int64_t last = bounds.min_tokens;
  for (const ResponseCurve& curve : curves) last = std::max(last, curve.budgets.back());
  if (bounds.max_tokens) last = std::min(last, *bounds.max_tokens);
  double best = INFINITY;
  std::optional<FrontierPoint> found;
  RETURN_IF_ERROR(allocator.ForEachAverage(
      bounds.min_tokens, last, [&](int64_t average, const ResponseAllocation& map) {
        if (map.predicted_kl <= max_kl) {
          found = FrontierPoint{.average_tokens = average,
                                .predicted_kl = map.predicted_kl,
                                .hull_kl = map.hull_kl,
                                .tokens = map.tokens};
          return false;
        }
        best = std::min(best, map.predicted_kl);
        return true;
      }));
  if (found) return *std::move(found);
  return absl::NotFoundError(Cat("response allocation: no average budget in [", bounds.min_tokens,
                                 ", ", last, "] predicts a KL of at most ", max_kl,
                                 " nats (the lowest is ", best, ")"));
}

}  // namespace ripplekv::method
