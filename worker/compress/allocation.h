#pragma once
// Allocation of a KV-cache token budget across layers: per-layer budgets b_l (tokens per KV head,
// every kept token counted, docs/DESIGN.md §2) for an average budget B over L layers.
//
// Rules shared by every allocation (docs/COMPRESSION.md, "Budget rules"):
//   * bounds: each b_l lies in [min_budget, max_budget], where max_budget is the prompt length n
//     (a layer cannot keep more than it has) and min_budget is the selection's minimum (its
//     observation window or sinks, capped at n);
//   * total: sum b_l = L * min(B, n) exactly. With B >= n every layer keeps everything. A layer
//     whose share would exceed n is clamped and the surplus is redistributed over the other
//     layers in proportion to their shares (water-filling), likewise for a layer raised to
//     min_budget; so every method spends the same memory at the same B;
//   * apportioning: method/apportion.h, the one routine every allocator (and RippleKV's budget
//     maps) uses: water-filling, then largest remainder, equal remainders to the larger target,
//     then the lower layer;
//   * InvalidArgument when B < min_budget < n (the average cannot pay for the minimum).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/base/status.h"
#include "worker/compress/attention_stats.h"

namespace ripplekv::worker {

struct BudgetBounds {
  int min_budget = 0;  // smallest per-layer budget, tokens (selection minimum, <= max_budget)
  int max_budget = 0;  // largest per-layer budget, tokens (the prompt length n)
};

// The total the allocations hand out: L * min(B, max_budget). InvalidArgument for L < 1, B < 0,
// bad bounds, or B below min_budget while B < max_budget.
[[nodiscard]] StatusOr<int64_t> TotalBudget(int n_layers, int average, BudgetBounds bounds);

// Integers b_l in [min, max] summing to exactly `total`, proportional to `targets` where the
// bounds allow: method::Apportion (b_l = clamp(c * t_l) with c chosen so the total is met, then
// largest remainder; integer targets inside the bounds that sum to `total` come back unchanged).
// Targets must be finite and >= 0 (all zero = equal shares). InvalidArgument naming the layer or
// the infeasible totals.
[[nodiscard]] StatusOr<std::vector<int>> FitBudgets(std::span<const double> targets, int64_t total,
                                                    BudgetBounds bounds);

// Every layer min(B, n).
[[nodiscard]] StatusOr<std::vector<int>> UniformBudgets(int n_layers, int average,
                                                        BudgetBounds bounds);

// PyramidKV's linear schedule (Cai et al. 2024, reference pyramidkv_utils.py), for observation
// window w (tokens, included in every budget) and beta >= 1: with prefix budget p = B - w,
//   min_num = p / beta, max_num = 2p - min_num (if max_num > n - w: max_num = n - w,
//   min_num = 2p - max_num), and layer l gets w + max_num - l * (max_num - min_num) / (L - 1).
// The reference rounds min_num and the step down to integers, so its total overshoots L * B;
// here the schedule stays real-valued (its mean is exactly B) and is rounded by largest remainder,
// so the total is exactly L * B. InvalidArgument for beta < 1 or w < 0.
[[nodiscard]] StatusOr<std::vector<int>> PyramidBudgets(int n_layers, int average, int window,
                                                        double beta, BudgetBounds bounds);

// CAKE's layer preferences (Qin et al., ICLR 2025): P_l = H_l^(1/tau1) * V_l^(1/tau2), H_l the
// spatial dispersion (LayerStats::window_entropy) and V_l the temporal shift (TemporalShift()).
// FailedPrecondition when a layer has no window statistics; InvalidArgument for tau <= 0.
[[nodiscard]] StatusOr<std::vector<double>> CakePreferences(std::span<const LayerStats> layers,
                                                            double tau1, double tau2);

// CAKE's allocation: b_l = L * B * P_l / sum(P) under the shared rules. All-zero (or non-finite)
// preferences fall back to uniform.
[[nodiscard]] StatusOr<std::vector<int>> CakeBudgets(std::span<const double> preferences,
                                                     int average, BudgetBounds bounds);

// A given budget map (RippleKV's map from a profile, or any map read from a file), returned exactly
// as given when it fits: every b_l in [min_budget, max_budget]. Its total must be L * B
// (InvalidArgument naming both totals): a map made for another average budget is refused, not
// rescaled. Only a prompt too short for the map changes it: with B >= n every layer keeps all n
// tokens; otherwise a layer whose budget is above n (or below the selection's minimum) is
// clamped and the map is re-apportioned by the same routine that made it (FitBudgets).
[[nodiscard]] StatusOr<std::vector<int>> MapBudgets(std::span<const int> map, int average,
                                                    BudgetBounds bounds);

}  // namespace ripplekv::worker
