#pragma once
// Budget mapping (docs/DESIGN.md §2, normative): from per-layer sensitivities to per-layer KV-cache
// token budgets that sum to exactly L * B, giving sensitive layers more. The steps, for
// sensitivities s_l of L layers, ratio r >= 1, average budget B and bounds [b_min, b_max]:
//   1. normalize: n_l in [0, 1] (Normalization below; every mode gives all zeros for a flat
//      profile);
//   2. exponential map: m_l = r ^ n_l (the most sensitive layer gets r times the least);
//   3. preserve the budget: b_l = T * m_l / sum(m), T = L * B (or a total given directly);
//   4. clamp to [b_min, b_max] and redistribute the excess over the unclamped layers
//      (water-filling) until the total is T again;
//   5. round by largest remainder, so the integers sum to exactly T; equal remainders go to the
//      more sensitive layer, then to the lower layer index.
// Steps 3-5 are the one apportioning routine of method/apportion.h, with the multipliers as
// weights and the sensitivities as the tie priority.
// A budget counts every token a layer keeps (observation window and sink tokens included), per KV
// head. docs/BUDGETS.md has a worked example.
//
// A response profile (objective response: each layer's measured loss under the real selector at a
// grid of budgets) is not mapped by these steps: its map is the allocation that minimizes the
// predicted loss (method/response_allocation.h; docs/BUDGETS.md, "Response allocation").
//
// Thread-safe (pure functions).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/apportion.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "method/response_allocation.h"

namespace ripplekv::method {

// Largest total budget L * B accepted, tokens. Keeps every intermediate in double exact to far
// below one token, so rounding cannot be disturbed by floating-point error.
inline constexpr int64_t kMaxTotalTokens = kMaxApportionTotal;

enum class Normalization {
  kMinMax,     // "minmax": n = (s - min s) / (max s - min s) (the docs/DESIGN.md §2 default)
  kRank,       // "rank": n = rank / (L - 1), ranks from 0, ties get the average of their ranks
  kLogMinMax,  // "log-minmax": min-max of log(s + log_epsilon)
};
// "minmax" / "rank" / "log-minmax".
std::string_view NormalizationName(Normalization normalization);
// The inverse of NormalizationName(); InvalidArgument for any other string.
[[nodiscard]] StatusOr<Normalization> ParseNormalization(std::string_view name);

struct BudgetOptions {
  double ratio = 2.0;  // r >= 1: multiplier of the most sensitive layer over the least
  // The total budget T, given one of two ways (exactly one must be set):
  int64_t average_tokens = 0;  // B > 0: average budget per layer, tokens; T = L * B; 0 = unset
  std::optional<int64_t> total_tokens;  // T > 0 directly, tokens (need not be a multiple of L)
  int64_t min_tokens = 1;               // b_min >= 1: smallest budget of any layer, tokens
  std::optional<int64_t> max_tokens;    // b_max, tokens; nullopt = unbounded
  Normalization normalization = Normalization::kMinMax;
  double log_epsilon = 1e-12;  // eps > 0 of kLogMinMax, nats (keeps log finite at s = 0)
  // Context length the budgets are meant for, tokens. When set, a layer budget above it is an
  // error (a layer cannot keep more tokens than the context has); nullopt = not checked.
  std::optional<int64_t> max_context;
  // Shrinkage of noisy layers, z >= 0: a profile's layer enters the map as its lower confidence
  // bound s_l = max(0, mean_kl - z * stderr) instead of its mean, so a layer that looks sensitive
  // only because of a few samples is not trusted with the largest budget (docs/BUDGETS.md,
  // "Shrinkage"). 0 = plain means. Needs a profile: the sensitivities overload refuses z > 0.
  double shrink_z = 0.0;
  // Budgets per KV head (docs/BUDGETS.md, "Per-head maps"): allocate a per-head response profile's
  // head curves (every KV head of every layer its own budget; BudgetMap::head_tokens). Needs a
  // profile with head curves (FailedPrecondition otherwise); the sensitivities overload refuses
  // it.
  bool per_head = false;
};

struct BudgetMap {
  std::string model_hash;  // of the profile it came from; empty for raw sensitivities
  // What the profile it came from measured: kNoise (the steps above; every map of bare
  // sensitivities) or kResponse (the response allocation). `selector` is the response profile's
  // selector; kSnapKv and not read for a noise map. The native document (budget_format.h) does
  // not carry them (it reads back as kNoise); a frozen map's does (frozen_map.h).
  Objective objective = Objective::kNoise;
  ResponseSelector selector = ResponseSelector::kSnapKv;
  // The parameters it was computed with. A response map records the bounds it used (min_tokens
  // raised to the selector's smallest budget) and, for the parameters the allocation does not
  // read, the defaults, except `ratio`: the realized ratio max(tokens) / min(tokens).
  BudgetOptions options;
  int64_t total_tokens = 0;     // T (L * B, or options.total_tokens) == sum(tokens)
  std::vector<int64_t> tokens;  // [L] budget of layer l, tokens, in [b_min, b_max]
  // A per-head map (options.per_head): [L][H] the budget of KV head h of layer l, tokens, each in
  // [b_min, b_max], all of them summing to H * total_tokens. tokens[l] is then the layer's mean
  // over its heads rounded by largest remainder (method::Apportion) so that the tokens still sum
  // to T: floor or ceil of sum_h head_tokens[l][h] / H, the per-layer map of the same memory
  // within a token per layer, for a consumer that takes one budget per layer. Empty: a per-layer
  // map, every head of layer l keeps tokens[l].
  std::vector<std::vector<int64_t>> head_tokens;
  // [L] m_l = r ^ n_l, before clamping. A response map: tokens_l / min(tokens), in [1, ratio].
  std::vector<double> multipliers;
  // [L] n_l in [0, 1]. A response map: ln(m_l) / ln(ratio) (0 when every layer has the same).
  std::vector<double> normalized;
};

// Checks `options` for a model of `num_layers` layers: every error of ComputeBudgetMap() that does
// not depend on the sensitivities (InvalidArgument, with the numbers).
[[nodiscard]] Status ValidateBudgetOptions(size_t num_layers, const BudgetOptions& options);

// T for `num_layers` layers: options.total_tokens if set, else num_layers * average_tokens.
// Meaningful only for options that pass ValidateBudgetOptions().
int64_t TotalTokens(size_t num_layers, const BudgetOptions& options);

// Step 1 alone: n_l for `sensitivity` (index = layer). Errors: InvalidArgument for an empty input
// or a value that is negative or not finite (naming its index), or log_epsilon <= 0.
[[nodiscard]] StatusOr<std::vector<double>> NormalizeSensitivities(
    std::span<const double> sensitivity, Normalization normalization, double log_epsilon = 1e-12);

// The budget map of `sensitivity` (index = layer). Errors (InvalidArgument, with the numbers): an
// empty input; a negative or non-finite sensitivity; ratio < 1 or not finite; neither or both of
// average_tokens and total_tokens set, or the one set <= 0; min_tokens < 1; min_tokens >
// max_tokens; infeasible bounds (L * b_min > T or L * b_max < T); T > kMaxTotalTokens; log_epsilon
// <= 0; a budget above max_context (naming the layer).
[[nodiscard]] StatusOr<BudgetMap> ComputeBudgetMap(std::span<const double> sensitivity,
                                                   const BudgetOptions& options);

// The sensitivities of every layer 0..n_layers-1 of a profile (index = layer): s_l = mean_kl, or
// with shrink_z > 0 the lower bound max(0, mean_kl - shrink_z * stderr). Errors: those of
// ValidateProfile(); InvalidArgument naming the first layer the profile does not cover (a budget
// map needs every layer), or for a shrink_z that is negative or not finite.
[[nodiscard]] StatusOr<std::vector<double>> LayerSensitivities(const SensitivityProfile& profile,
                                                               double shrink_z = 0.0);

// The bounds of a response allocation with `selector` for `options` (tokens): lo is
// max(min_tokens, MinResponseBudget(selector)), since the selector keeps at least that many
// tokens whatever it is given; hi is the smaller of max_tokens and max_context, unbounded when
// neither is set.
ApportionBounds ResponseBounds(ResponseSelector selector, const BudgetOptions& options);

// The budget map of a profile, by what it measured (params.objective), model_hash from the
// profile:
//   - noise: s_l = LayerSensitivities(profile, options.shrink_z) through the steps above;
//   - response: AllocateByResponse() of ResponseCurves(profile), T tokens within
//     ResponseBounds(); ratio, normalization, log_epsilon and shrink_z are neither read nor
//     checked (BudgetMap says what the map records instead).
// The profile must cover every layer 0..n_layers-1 (InvalidArgument naming the first missing layer
// otherwise). Other errors as ValidateProfile() and the overload above; a response map's infeasible
// bounds name the raised min_tokens, and L * max_context < T is an error.
[[nodiscard]] StatusOr<BudgetMap> ComputeBudgetMap(const SensitivityProfile& profile,
                                                   const BudgetOptions& options);

// The errors of ComputeBudgetMap(profile, options) that are the profile's whatever the options:
// ValidateProfile(), a layer not measured, a response profile without response points. A caller
// serving stored profiles tells them apart from bad options this way.
[[nodiscard]] Status ValidateMapProfile(const SensitivityProfile& profile);

}  // namespace ripplekv::method
