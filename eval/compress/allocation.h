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
//     min_budget (CAKE spreads its surplus evenly, as its reference does); so every method
//     spends the same memory at the same B;
//   * apportioning: method/apportion.h, the one routine the allocators use (RippleKV's budget
//     maps, uniform, PyramidKV, and every re-apportioning fallback): water-filling, then largest
//     remainder, equal remainders to the larger target, then the lower layer. CAKE is the
//     exception: its integers follow its reference code (CakeBudgets), and FitBudgets only repairs
//     the corner cases where that arithmetic leaves the bounds;
//   * InvalidArgument when B < min_budget < n (the average cannot pay for the minimum).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/compress/attention_stats.h"

namespace ripplekv::eval {

// Statistics are the worker's (worker/compress/attention_stats.h).
using worker::LayerStats;

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
// window w (tokens, included in every budget) and beta >= 1. With prefix budget p = B - w:
//   * B >= n: every layer keeps all n tokens (the reference keeps everything when n < B);
//   * p <= 0 (B <= w, possible only for selections whose minimum is below the window): every layer
//     B; there is no prefix budget to schedule (the reference requires B > w);
//   * n < 2p: every layer B, the reference's SnapKV-like fallback for short prompts
//     (q_len < (max_capacity_prompt - window_size) * 2);
//   * otherwise min_num = p / beta, max_num = 2p - min_num (if max_num > n - w: max_num = n - w,
//     min_num = 2p - max_num), and layer l gets w + max_num - l * (max_num - min_num) / (L - 1).
//     The reference rounds min_num and the step down to integers, so its total overshoots L * B;
//     here the schedule stays real-valued (its mean is exactly B) and is rounded by FitBudgets
//     (largest remainder), so the total is exactly L * B.
// A single layer keeps B. InvalidArgument for beta < 1 or w < 0.
[[nodiscard]] StatusOr<std::vector<int>> PyramidBudgets(int n_layers, int average, int window,
                                                        double beta, BudgetBounds bounds);

// CAKE's layer preferences (Qin et al., ICLR 2025): P_l = H_l^(1/tau1) * V_l^(1/tau2), H_l the
// spatial dispersion (LayerStats::window_entropy) and V_l the temporal shift (TemporalShift()).
// FailedPrecondition when a layer has no window statistics; InvalidArgument for tau <= 0.
[[nodiscard]] StatusOr<std::vector<double>> CakePreferences(std::span<const LayerStats> layers,
                                                            double tau1, double tau2);

// CAKE's allocation (reference cake_cache.py, CakeprefillKVCache, and utils.py, adjust_budgets),
// for observation window w (tokens, kept by every layer on top of its prefix budget):
//   1. prefix budget T = (B - w) * L; shares s_l = P_l / sum(P) * T in double (all-zero, negative
//      or non-finite preferences: T / L each), truncated to integers as numpy's dtype=int does;
//   2. CakeAdjustBudgets(shares, T, n - w): the excess over the cap spread evenly, then the
//      difference to T spread evenly (remainders to the lowest layers, not by largest remainder);
//   3. layer l keeps w + share_l.
// So the integers follow CAKE's reference, not method/apportion. Cases outside that arithmetic:
//   * B >= n: every layer keeps all n tokens;
//   * B <= w (possible only for selections whose minimum is below the window): every layer B, as at
//     B == w, where the prefix budget is 0 (the reference's prefix budget would be negative);
//   * when the result leaves the bounds, it is re-apportioned by FitBudgets with the result as the
//     targets (each layer in [min_budget, n], total L * B). With w < B < n the total is always
//     exact and no prefix is negative, so this happens only when (a) the even spread of step 2
//     lifts a layer that was below the cap above it (the reference then clips that layer to
//     n - w and leaves the tokens unspent), or (b) min_budget > w (e.g. StreamingLLM with more
//     sinks than the window) and a layer's prefix share is below min_budget - w.
// Deliberate difference: the reference skips compression entirely when n <= B + w; here every
// prompt with B < n is compressed to the shared total L * B. The reference computes the shares on
// float32 tensors, so a share within float32 rounding of an integer may truncate differently there.
// InvalidArgument for w < 0 and the TotalBudget errors.
[[nodiscard]] StatusOr<std::vector<int>> CakeBudgets(std::span<const double> preferences,
                                                     int average, int window, BudgetBounds bounds);

// CAKE's adjust_budgets on integer prefix budgets (reference utils.py), exposed for tests:
//   1. every budget above `cap` is set to `cap`; their summed excess E is spread over the layers
//      that are now below the cap: E / k each (integer division, k of them) and one more to the
//      first E % k in layer order (none below the cap: E is dropped). This may lift a layer above
//      the cap; it is not clipped again;
//   2. D = total - sum: if D > 0 over the layers below the cap, if D < 0 over the layers above 1,
//      |D| / k each and the remainder one each to the first such layers in layer order (no such
//      layer: unchanged); this too may lift a layer above the cap. From CakeBudgets D is never
//      negative: the truncated shares sum to at most the total, and step 1 conserves the sum.
std::vector<int64_t> CakeAdjustBudgets(std::span<const int64_t> budgets, int64_t total,
                                       int64_t cap);

// A given budget map (RippleKV's map from a profile, or any map read from a file), returned exactly
// as given when it fits: every b_l in [min_budget, max_budget]. Its total must be L * B
// (InvalidArgument naming both totals): a map made for another average budget is refused, not
// rescaled. Only a prompt too short for the map changes it: with B >= n every layer keeps all n
// tokens; otherwise a layer whose budget is above n (or below the selection's minimum) is
// clamped and the map is re-apportioned by the same routine that made it (FitBudgets).
[[nodiscard]] StatusOr<std::vector<int>> MapBudgets(std::span<const int> map, int average,
                                                    BudgetBounds bounds);

}  // namespace ripplekv::eval
