#pragma once
// The allocation that minimizes a measured compression response (docs/BUDGETS.md, "Response
// allocation"). A response curve is what one layer loses when it alone is compressed: KL_l(b),
// the probe tokens' mean KL (nats) against the full cache with layer l kept at b tokens by the
// real selector and every other layer full, measured on a grid of budgets. Given a total T and
// bounds [lo, hi], the allocation picks integer budgets b_l minimizing the predicted loss
// sum_l KL_l(b_l) subject to sum_l b_l = T exactly.
//
// Between grid points a curve is linear in ln b (the budgets of a grid are geometric); below its
// first point the first segment's slope continues, but never below the first point's KL (a layer
// does not get better with fewer tokens); above its last point (the full cache) it is flat.
//
// The rule: every layer's curve, sampled at the integer budgets in [lo, hi], is replaced by its
// lower convex hull, whose segments have non-decreasing slopes (KL per token). Starting from lo
// everywhere, whole hull segments are taken in order of slope, steepest loss reduction first
// (ties: the lower layer, then the layer's own order), until the next segment is longer than what
// is left, which that segment then takes in part. This is the exact optimum of the hulls, so:
//   - convex curves (the hull is the curve): the allocation is optimal among all integer
//     allocations within the bounds;
//   - non-convex curves: `hull_kl` (the hulls' sum) is a lower bound of the optimum and
//     `predicted_kl` (the curves' sum at the chosen budgets) an upper bound; only layers whose
//     budget falls inside a hull segment, where the curve bulges above its hull, can differ from
//     the optimum, and at most one layer ends inside a segment.
// Without an upper bound a layer's hull is the limit of the hull over [lo, hi] as hi grows: it
// falls to the curve's lowest point and stays flat there. Tokens beyond every layer's lowest point
// go first to layers whose curve is flat there (past their full cache), then to layers whose curve
// rises again after its lowest point (noise), in layer order.
// Cost: O(sum over layers of min(hi, max(lo, last grid budget)) - lo) curve evaluations to
// prepare the hulls, then O(hull segments) per total.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "method/apportion.h"
#include "method/profile.h"

namespace ripplekv::method {

// One layer's measured response to compression.
struct ResponseCurve {
  std::vector<int64_t> budgets;  // [G] strictly ascending, >= 1, tokens
  std::vector<double> kl;        // [G] mean KL at each budget, finite, >= 0, nats
};

// The curve of every layer 0..n_layers-1 of a response profile (index = layer): its points'
// budgets and mean KL, in grid order. Errors: FailedPrecondition for a profile whose objective is
// not response ("profile measured objective noise; response allocation needs a response
// profile"); those of ValidateProfile(); InvalidArgument naming the first layer the profile does
// not cover (an allocation needs every layer), or one without response points.
[[nodiscard]] StatusOr<std::vector<ResponseCurve>> ResponseCurves(
    const SensitivityProfile& profile);

// The curve of every KV head of every layer of a per-head response profile ([L][H], index = layer,
// then head): each head's points, in grid order. Errors: those of ResponseCurves();
// FailedPrecondition for a profile without head curves (params.kv_heads 0); InvalidArgument naming
// the layer and head of a curve ValidateResponseCurve() refuses.
[[nodiscard]] StatusOr<std::vector<std::vector<ResponseCurve>>> HeadResponseCurves(
    const SensitivityProfile& profile);

// The curves an allocation takes: every layer's (ResponseCurves()), or with `per_head` every
// layer's KV heads' (HeadResponseCurves()), layer-major, `heads` of them per layer. Errors as
// those functions'.
struct AllocationCurves {
  std::vector<ResponseCurve> curves;  // [L * heads]
  size_t heads = 1;                   // curves per layer: 1, or H with per_head
};
[[nodiscard]] StatusOr<AllocationCurves> AllocationCurvesOf(const SensitivityProfile& profile,
                                                            bool per_head);

// Checks one curve; InvalidArgument naming the point (index and budget) that is wrong.
[[nodiscard]] Status ValidateResponseCurve(const ResponseCurve& curve);

// KL_l(budget) of a valid curve, interpolated as described above; budget >= 1 tokens.
double InterpolateResponse(const ResponseCurve& curve, double budget);

struct ResponseAllocation {
  std::vector<int64_t> tokens;  // [L] b_l in [lo, hi], summing to exactly the total, tokens
  double predicted_kl = 0.0;    // sum_l KL_l(b_l) on the curves, nats
  double hull_kl = 0.0;         // sum over layers of the hull at b_l, nats: <= the optimum
};

// The curves' hulls, prepared once for any number of totals (a frontier, a search over memory).
class ResponseAllocator {
 public:
  // Errors (InvalidArgument, with the numbers): no curves; a curve ValidateResponseCurve()
  // refuses (naming its layer); lo < 1 (a layer must keep a token for its curve to be defined),
  // hi < lo or lo > kMaxApportionTotal.
  [[nodiscard]] static StatusOr<ResponseAllocator> Create(std::span<const ResponseCurve> curves,
                                                          ApportionBounds bounds);

  // The allocation of `total` tokens (rule above), in O(hull segments). InvalidArgument when the
  // total is outside [L * lo, L * hi] or above kMaxApportionTotal.
  [[nodiscard]] StatusOr<ResponseAllocation> Allocate(int64_t total) const;

  // Allocate(L * a) for every average budget a = first, first + 1, ..., last in one pass over the
  // hull segments (the allocation of a larger total extends a smaller one's), each equal to
  // Allocate()'s bit for bit: `visit(a, allocation)` is called in order until it returns false.
  // Cost: O(hull segments + (last - first + 1) * L). InvalidArgument as Allocate() when a total
  // is out of range (checked before any visit), or last < first.
  [[nodiscard]] Status ForEachAverage(
      int64_t first, int64_t last,
      const std::function<bool(int64_t average, const ResponseAllocation& allocation)>& visit)
      const;

 private:
  // One piece of a layer's lower convex hull: `length` more tokens change its KL by `slope` nats
  // per token.
  struct HullSegment {
    size_t layer = 0;
    size_t order = 0;    // position in the layer's hull; slopes rise with it
    int64_t length = 0;  // tokens, > 0
    double slope = 0.0;  // nats per token
    // The flat tail of an unbounded hull whose curve rises after its lowest point: slope 0 in
    // the limit, but taken after every truly flat one.
    bool rises_after = false;
  };

  ResponseAllocator() = default;

  // InvalidArgument unless Allocate(total) can allocate it.
  [[nodiscard]] Status CheckTotal(int64_t total) const;
  // Fills predicted_kl from the tokens and clamps hull_kl (Allocate()'s last step).
  void Finish(ResponseAllocation& out) const;

  std::vector<ResponseCurve> curves_;
  ApportionBounds bounds_;
  double base_hull_kl_ = 0.0;          // sum of the hulls at lo, nats
  std::vector<HullSegment> segments_;  // every layer's, steepest first (ties: layer, order)
};

// ResponseAllocator::Create(curves, bounds)->Allocate(total), errors of both.
[[nodiscard]] StatusOr<ResponseAllocation> AllocateByResponse(std::span<const ResponseCurve> curves,
                                                              int64_t total,
                                                              ApportionBounds bounds);

// The optimal map at one average budget B (total L * B).
struct FrontierPoint {
  int64_t average_tokens = 0;   // B, tokens
  double predicted_kl = 0.0;    // as ResponseAllocation, nats
  double hull_kl = 0.0;         // as ResponseAllocation, nats
  std::vector<int64_t> tokens;  // [L] the map
};

// Quality predicted from memory: the optimal map at each average budget of `averages` (each in
// [1, kMaxApportionTotal / L] and feasible for the bounds), in their order. Errors as
// ResponseAllocator.
[[nodiscard]] StatusOr<std::vector<FrontierPoint>> ResponseFrontier(
    std::span<const ResponseCurve> curves, std::span<const int64_t> averages,
    ApportionBounds bounds);

// Memory from quality: the smallest average budget B >= lo whose optimal map's predicted KL is at
// most `max_kl` nats, searched up to where more memory changes nothing (every layer's full cache,
// or hi). NotFound, naming the lowest predicted KL, when no budget reaches it; InvalidArgument as
// ResponseAllocator, or for a `max_kl` that is not finite and >= 0. Cost: one
// ResponseAllocator::ForEachAverage() pass over the averages tried.
[[nodiscard]] StatusOr<FrontierPoint> SmallestAverageForKl(std::span<const ResponseCurve> curves,
                                                           double max_kl, ApportionBounds bounds);

}  // namespace ripplekv::method
