#pragma once
// The one apportioning routine (docs/DESIGN.md §2, step 4): integers that sum to exactly a given
// total, in proportion to per-layer weights where bounds allow. RippleKV's budget maps (weights
// r ^ n_l), uniform and PyramidKV (its linear schedule) use it, so a map computed by the scheduler
// is the map the compression runtime applies. CAKE rounds as its reference code does
// (eval/compress/allocation.h) and falls back to this routine only where that leaves the
// bounds; every method still spends exactly the same total.
//
// The rule, for weights w_l of L layers, a total T and bounds [lo, hi]:
//   1. water-filling: real budgets b_l = clamp(c * w_l, lo, hi) with c such that sum b_l = T.
//      Found exactly (no bisection): spread what the fixed layers leave over the free ones in
//      proportion to w, fix the violators at their bound, repeat (at most L + 1 rounds). Only
//      the proportions of w matter; zero weights get nothing while a positive-weight layer is
//      free, and equal shares of whatever is left once every positive-weight layer is fixed
//      (all-zero weights: equal shares);
//   2. largest remainder: floor every b_l, then give the missing tokens one each to the layers
//      with the largest fractional parts.
//   Tie rule (one for every allocator): equal remainders go to the layer with the higher
//   priority, then to the lower layer index. The priority is the caller's (RippleKV's maps use
//   the sensitivity, so budgets never order against it even at r = 1) and defaults to the weight.
//
// Thread-safety: a pure function.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"

namespace ripplekv::method {

// Largest total accepted, tokens. Keeps every intermediate in double exact to far below one
// token, so rounding cannot be disturbed by floating-point error.
inline constexpr int64_t kMaxApportionTotal = int64_t{1} << 40;

struct ApportionBounds {
  int64_t min_tokens = 0;             // lo >= 0: smallest budget of any layer, tokens
  std::optional<int64_t> max_tokens;  // hi >= lo, tokens; nullopt = unbounded
};

// The integer budgets b_l of the rule above, in [lo, hi], summing to exactly `total`.
// `priority` is empty (ties by weight) or has one entry per layer. Errors (InvalidArgument, with
// the numbers): no layers; a weight or priority that is negative or not finite (naming the
// layer); a priority of another length; lo < 0 or hi < lo; total < 0 or > kMaxApportionTotal;
// infeasible bounds (L * lo > total or L * hi < total).
[[nodiscard]] StatusOr<std::vector<int64_t>> Apportion(std::span<const double> weights,
                                                       int64_t total, ApportionBounds bounds,
                                                       std::span<const double> priority = {});

}  // namespace ripplekv::method
