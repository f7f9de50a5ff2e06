#pragma once
// Control allocations for RippleKV's budget maps (docs/COMPRESSION.md, "Controls"): maps at the
// same ratio and the same memory as RippleKV's whose layer values do not come from the measured
// profile, so that a comparison can tell "the measured profile matters" from "any skewed map
// helps". Each is a kMap allocation and runs like any method (`ripplekv eval --methods`):
//
//   ripple            the map of the profile's sensitivities s_l (RippleKV itself)
//   ripple-perm<k>    the map of s permuted by seeded permutation k >= 1 (Fisher-Yates over
//                     SplitMix64): the same multiset of layer values, hence the same spread of
//                     budgets, given to other layers
//   ripple-rev        the map of s reversed (layer l gets s_{L-1-l})
//   spike<k>          uniform plus one layer: the largest budget of RippleKV's map goes to layer
//                     j_k (a seeded uniform draw, k >= 1), the rest of the total is spread evenly
//                     over the other layers (method::Apportion, so it sums exactly)
//
// Every control spends exactly the total of RippleKV's map at the same options.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"

namespace ripplekv::eval {

enum class MapControlKind {
  kNone,      // the profile's own map
  kPermuted,  // layer values permuted
  kReversed,  // layer values reversed
  kSpike,     // uniform plus one layer given the largest budget
};

struct MapControl {
  MapControlKind kind = MapControlKind::kNone;
  uint64_t seed = 0;  // k of ripple-perm<k> / spike<k>, >= 1; 0 otherwise
};

// The control an allocation name asks for: "ripple" and "map" -> kNone, "ripple-perm<k>" ->
// kPermuted, "ripple-rev" -> kReversed, "spike<k>" -> kSpike, with k a decimal integer >= 1
// without leading zeros. nullopt for anything else.
std::optional<MapControl> ParseMapControl(std::string_view allocation);

// `name` with a control given without its k ("ripple-perm+snapkv", "spike+h2o") expanded to the
// names of k = 1..seeds ("ripple-perm1+snapkv", ...); any other name alone.
std::vector<std::string> ExpandMapControl(std::string_view name, int seeds);

// The layer values a control maps: `values` permuted (kPermuted), reversed (kReversed), or
// unchanged (kNone, kSpike).
std::vector<double> ControlValues(std::span<const double> values, MapControl control);

// `map` with its largest entry moved to layer j (drawn with `seed`) and the remaining total
// spread evenly over the other layers, each at least `min_tokens` (largest remainder, equal
// remainders to the lower layer). InvalidArgument for an empty map, seed 0, or a remaining total
// the other layers cannot hold at min_tokens.
[[nodiscard]] StatusOr<std::vector<int64_t>> SpikeMap(std::span<const int64_t> map,
                                                      int64_t min_tokens, uint64_t seed);

// The layer budgets of `control` for sensitivities `values` at `options` (method::
// ComputeBudgetMap on ControlValues; kSpike: SpikeMap of the plain map with options.min_tokens).
// Errors: those of ComputeBudgetMap and SpikeMap.
[[nodiscard]] StatusOr<std::vector<int64_t>> ControlMap(std::span<const double> values,
                                                        const method::BudgetOptions& options,
                                                        MapControl control);

}  // namespace ripplekv::eval
