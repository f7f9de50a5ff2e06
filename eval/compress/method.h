#pragma once
// Compression methods = allocation across layers x token selection within a layer, and the step
// that applies one to a prefilled KvCache (docs/COMPRESSION.md).
//
// Method names: "<allocation>+<selection>" with allocation in {uniform, pyramid, cake, ripple,
// map} and selection in {snapkv, streaming, h2o, cake}, plus the shorthands
//   full      no compression
//   snapkv    uniform+snapkv         pyramidkv  pyramid+snapkv
//   streaming uniform+streaming      h2o        uniform+h2o
//   cake      cake+cake (CAKE's own layer allocation and eviction indicator)
// "ripple" and "map" both take a given per-layer budget map (RippleKV's, made from a profile by the
// scheduler, or any map read from a file); they differ only in name. The control allocations
// ripple-perm<k>, ripple-rev and spike<k> (control_maps.h) are kMap methods too: the caller makes
// their maps.
//
// Typical use:
//   ASSIGN_OR_RETURN(Method m, ParseMethod("ripple+snapkv"));
//   ASSIGN_OR_RETURN(ObservedPrefill p,
//                    PrefillObserved(t, prompt, ObserverOptionsFor(m, options), cache));
//   ASSIGN_OR_RETURN(std::vector<int> b, PlanBudgets(m, average, p.layers, options, map));
//   ASSIGN_OR_RETURN(CompressReport r, CompressCache(m, b, p.layers, options, cache));
//   then decode with Transformer::Forward at explicit positions n, n+1, ...
//
// Thread-safety: pure functions, except CompressCache, which mutates the given cache.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "worker/compress/attention_stats.h"
#include "worker/compress/prefill_observer.h"
#include "worker/compress/selection.h"
#include "worker/engine/kv_cache.h"

namespace ripplekv::eval {

// The selectors and the observed prefill are the worker's (worker/compress/), which the response
// calibration shares; the evaluation names them as its own.
using worker::LayerStats;
using worker::MinBudget;
using worker::ObservedPrefill;
using worker::ObserverOptions;
using worker::PoolKind;
using worker::PrefillObserved;
using worker::SelectionKind;
using worker::SelectionName;
using worker::SelectionOptions;
using worker::SelectTokens;
using worker::ValidateSelectionOptions;

enum class AllocationKind {
  kUniform,  // every layer B
  kPyramid,  // PyramidKV's linear schedule (uniform for prompts shorter than 2 (B - w))
  kCake,     // CAKE's split of the prefix budget by layer preference, window on top
  kMap,      // a given budget map (RippleKV or a file)
  kFull,     // every layer keeps the whole prompt
};
// "uniform", "pyramid", "cake", "map", "full".
std::string_view AllocationName(AllocationKind kind);

struct Method {
  std::string name;  // canonical "<allocation>+<selection>" ("full" for no compression)
  AllocationKind allocation = AllocationKind::kFull;
  SelectionKind selection = SelectionKind::kFull;

  bool needs_window_stats() const;
  bool needs_accumulated() const;
  bool needs_budget_map() const { return allocation == AllocationKind::kMap; }
  // "resp+S": a kMap method whose maps minimize the summed response of a response profile
  // measured with selector S (method/response_allocation.h); the caller makes them.
  bool from_response_profile() const;
};

struct CompressOptions {
  // Observation window w of SnapKV / CAKE, tokens (SnapKV's published configs use 32, as does
  // CAKE's reference code). Kept tokens of the window count against the budget. PyramidKV and
  // CAKE allocations add w to every layer's prefix budget, whatever the selection.
  int window = 32;
  SelectionOptions selection;  // pooling, sinks, H2O split, CAKE indicator
  double pyramid_beta = 20.0;  // PyramidKV's beta (its reference default), >= 1
  // CAKE temperatures of P_l = H_l^(1/tau1) * V_l^(1/tau2); 1.0 is CAKE's reference fallback
  // (the paper tunes them per model).
  double cake_tau1 = 1.0;
  double cake_tau2 = 1.0;
};

// Parses a method name (case-sensitive, as listed above). InvalidArgument naming the known
// methods for anything else.
[[nodiscard]] StatusOr<Method> ParseMethod(std::string_view name);
// The accepted names: the shorthands, then every allocation+selection pair.
std::vector<std::string> KnownMethods();

// What the prefill must record for `method`.
ObserverOptions ObserverOptionsFor(const Method& method, const CompressOptions& options);

// Per-layer budgets (tokens per KV head) at average budget `average` for a prompt whose statistics
// are `layers` (allocation.h: bounds [selection minimum, n], total L * min(B, n)): UniformBudgets,
// PyramidBudgets (window, pyramid_beta), CakeBudgets over CakePreferences (window, cake_tau1,
// cake_tau2; integers as CAKE's reference rounds them, not method/apportion) or MapBudgets.
// `budget_map` ([n_layers]) is required for kMap allocations and ignored otherwise. Errors:
// InvalidArgument (bad options, map missing / of the wrong size / wrong total, average below the
// selection minimum), FailedPrecondition (statistics the method needs were not recorded).
[[nodiscard]] StatusOr<std::vector<int>> PlanBudgets(const Method& method, int average,
                                                     std::span<const LayerStats> layers,
                                                     const CompressOptions& options,
                                                     std::span<const int> budget_map = {});

struct CompressReport {
  std::vector<int> kept;  // [n_layers] entries per KV head after compression
  int64_t total = 0;      // sum of kept
};

// Keeps, in every layer l of `cache`, the entries `method`'s selection picks under budgets[l]
// (KvCache::Retain); positions stay the original ones, so decoding continues at positions n,
// n+1, ... The cache must be the one PrefillObserved filled with `layers` (FailedPrecondition when
// a layer's length differs). InvalidArgument for a budgets size != n_layers or a budget below the
// selection's minimum. Every layer's selection is made before any is applied: on error the cache
// is unchanged.
[[nodiscard]] StatusOr<CompressReport> CompressCache(const Method& method,
                                                     std::span<const int> budgets,
                                                     std::span<const LayerStats> layers,
                                                     const CompressOptions& options,
                                                     worker::KvCache& cache);

}  // namespace ripplekv::eval
