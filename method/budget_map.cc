#include "method/budget_map.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "method/apportion.h"
#include "method/resampling.h"
#include "method/response_allocation.h"

namespace ripplekv::method {
namespace {

Status BudgetError(std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("budget map: ", Sv(message)));
}

// Min-max scaling to [0, 1]; all zeros when every value is equal. The maximum maps to exactly 1
// and the minimum to exactly 0, and rounding keeps every result inside [0, 1].
std::vector<double> MinMax(const std::vector<double>& x) {
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  const double mn = *lo, mx = *hi;
  std::vector<double> n(x.size(), 0.0);
  if (!(mx > mn)) return n;
  const double range = mx - mn;
  for (size_t i = 0; i < x.size(); ++i) n[i] = (x[i] - mn) / range;
  return n;
}

// rank / (L - 1) with ranks 0..L-1 and ties sharing the average of their ranks.
std::vector<double> Rank(std::span<const double> s) {
  const size_t L = s.size();
  if (std::adjacent_find(s.begin(), s.end(), std::not_equal_to<>()) == s.end()) {
    return std::vector<double>(L,
                               0.0);  // flat (or a single layer): all zeros, as in the other modes
  }
  std::vector<double> n = AverageRanks(s);
  for (double& r : n) r = (r - 1.0) / static_cast<double>(L - 1);
  return n;
}

Status ValidateOptionsImpl(size_t num_layers, const BudgetOptions& o) {
  if (!std::isfinite(o.ratio) || o.ratio < 1.0) {
    return BudgetError(absl::StrCat("ratio must be finite and >= 1, got ", o.ratio));
  }
  if (o.total_tokens && o.average_tokens != 0) {
    return BudgetError(absl::StrCat("give average_tokens or total_tokens, not both (got ",
                                    o.average_tokens, " and ", *o.total_tokens, ")"));
  }
  if (o.total_tokens && *o.total_tokens <= 0) {
    return BudgetError(absl::StrCat("total_tokens must be > 0, got ", *o.total_tokens));
  }
  if (!o.total_tokens && o.average_tokens <= 0) {
    return BudgetError(absl::StrCat("average_tokens must be > 0, got ", o.average_tokens));
  }
  if (o.min_tokens < 1) {
    return BudgetError(absl::StrCat("min_tokens must be >= 1, got ", o.min_tokens));
  }
  if (o.max_tokens && *o.max_tokens < o.min_tokens) {
    return BudgetError(absl::StrCat("infeasible bounds: min_tokens ", o.min_tokens,
                                    " > max_tokens ", *o.max_tokens));
  }
  if (o.max_context && *o.max_context <= 0) {
    return BudgetError(absl::StrCat("max_context must be > 0, got ", *o.max_context));
  }
  const __int128 L = static_cast<__int128>(num_layers);
  const __int128 total = o.total_tokens ? __int128{*o.total_tokens} : L * o.average_tokens;
  // Names how T was given, for the messages below.
  const std::string total_text =
      o.total_tokens ? absl::StrCat("total_tokens ", *o.total_tokens)
                     : absl::StrCat(num_layers, " x average_tokens ", o.average_tokens);
  if (total > kMaxTotalTokens) {
    return BudgetError(absl::StrCat("total budget (", total_text, ") exceeds the limit of ",
                                    kMaxTotalTokens, " tokens"));
  }
  if (L * o.min_tokens > total) {
    return BudgetError(absl::StrCat("infeasible bounds: ", num_layers, " layers x min_tokens ",
                                    o.min_tokens, " = ", static_cast<int64_t>(L * o.min_tokens),
                                    " > total ", static_cast<int64_t>(total), " (", total_text,
                                    ")"));
  }
  if (o.max_tokens && L * *o.max_tokens < total) {
    return BudgetError(absl::StrCat("infeasible bounds: ", num_layers, " layers x max_tokens ",
                                    *o.max_tokens, " = ", static_cast<int64_t>(L * *o.max_tokens),
                                    " < total ", static_cast<int64_t>(total), " (", total_text,
                                    ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view NormalizationName(Normalization normalization) {
  switch (normalization) {
    case Normalization::kMinMax:
      return "minmax";
    case Normalization::kRank:
      return "rank";
    case Normalization::kLogMinMax:
      return "log-minmax";
  }
  return "unknown";
}

StatusOr<Normalization> ParseNormalization(std::string_view name) {
  if (name == "minmax") return Normalization::kMinMax;
  if (name == "rank") return Normalization::kRank;
  if (name == "log-minmax") return Normalization::kLogMinMax;
  return absl::InvalidArgumentError(absl::StrCat("unknown normalization \"", Sv(name),
                                                 "\" (expected minmax, rank or log-minmax)"));
}

Status ValidateBudgetOptions(size_t num_layers, const BudgetOptions& options) {
  if (num_layers == 0) return BudgetError("empty profile (no layers)");
  if (!std::isfinite(options.shrink_z) || options.shrink_z < 0) {
    return BudgetError(absl::StrCat("shrink_z must be finite and >= 0, got ", options.shrink_z));
  }
  if (!std::isfinite(options.log_epsilon) || options.log_epsilon <= 0) {
    return BudgetError(
        absl::StrCat("log_epsilon must be finite and > 0, got ", options.log_epsilon));
  }
  return ValidateOptionsImpl(num_layers, options);
}

int64_t TotalTokens(size_t num_layers, const BudgetOptions& options) {
  return options.total_tokens ? *options.total_tokens
                              : static_cast<int64_t>(num_layers) * options.average_tokens;
}

StatusOr<std::vector<double>> NormalizeSensitivities(std::span<const double> sensitivity,
                                                     Normalization normalization,
                                                     double log_epsilon) {
  if (sensitivity.empty()) return BudgetError("empty profile (no layers)");
  for (size_t l = 0; l < sensitivity.size(); ++l) {
    if (!std::isfinite(sensitivity[l]) || sensitivity[l] < 0) {
      return BudgetError(absl::StrCat("sensitivity of layer ", l, " is ", sensitivity[l],
                                      "; it must be finite and >= 0"));
    }
  }
  switch (normalization) {
    case Normalization::kMinMax:
      return MinMax(std::vector<double>(sensitivity.begin(), sensitivity.end()));
    case Normalization::kRank:
      return Rank(sensitivity);
    case Normalization::kLogMinMax: {
      if (!std::isfinite(log_epsilon) || log_epsilon <= 0) {
        return BudgetError(absl::StrCat("log_epsilon must be finite and > 0, got ", log_epsilon));
      }
      std::vector<double> x(sensitivity.size());
      for (size_t l = 0; l < x.size(); ++l) x[l] = std::log(sensitivity[l] + log_epsilon);
      return MinMax(x);
    }
  }
  return BudgetError("unknown normalization");
}

StatusOr<BudgetMap> ComputeBudgetMap(std::span<const double> sensitivity,
                                     const BudgetOptions& options) {
  if (options.shrink_z != 0.0) {
    return BudgetError(absl::StrCat("shrink_z ", options.shrink_z,
                                    " needs a profile's standard errors, not bare sensitivities"));
  }
  if (options.per_head) {
    return BudgetError("per_head needs a per-head response profile, not bare sensitivities");
  }
  ASSIGN_OR_RETURN(std::vector<double> normalized,
                   NormalizeSensitivities(sensitivity, options.normalization, options.log_epsilon));
  RETURN_IF_ERROR(ValidateBudgetOptions(sensitivity.size(), options));
  const size_t L = sensitivity.size();
  BudgetMap map;
  map.options = options;
  map.total_tokens = TotalTokens(L, options);
  map.normalized = std::move(normalized);
  map.multipliers.resize(L);
  for (size_t l = 0; l < L; ++l) map.multipliers[l] = std::pow(options.ratio, map.normalized[l]);
  // Steps 3-5 (the budget is preserved by apportioning the total in proportion to m): the one
  // apportioning routine, equal remainders to the more sensitive layer.
  ASSIGN_OR_RETURN(
      map.tokens,
      Apportion(map.multipliers, map.total_tokens,
                {.min_tokens = options.min_tokens, .max_tokens = options.max_tokens}, sensitivity));
  if (options.max_context) {
    for (size_t l = 0; l < L; ++l) {
      if (map.tokens[l] > *options.max_context) {
        return BudgetError(absl::StrCat(
            "layer ", l, " gets ", map.tokens[l], " tokens, more than max_context ",
            *options.max_context,
            "; lower the ratio or average_tokens, or set max_tokens <= ", *options.max_context));
      }
    }
  }
  return map;
}

StatusOr<std::vector<double>> LayerSensitivities(const SensitivityProfile& profile,
                                                 double shrink_z) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  if (!std::isfinite(shrink_z) || shrink_z < 0) {
    return BudgetError(absl::StrCat("shrink_z must be finite and >= 0, got ", shrink_z));
  }
  // ValidateProfile() guarantees strictly ascending layers in [0, n_layers), so full coverage is
  // layers[i].layer == i for every i < n_layers.
  std::vector<double> sensitivity;
  sensitivity.reserve(profile.layers.size());
  for (int64_t l = 0; l < profile.model.n_layers; ++l) {
    if (l >= static_cast<int64_t>(profile.layers.size()) || profile.layers[l].layer != l) {
      return BudgetError(absl::StrCat("the profile has no sensitivity for layer ", l, " of ",
                                      profile.model.n_layers,
                                      "; a budget map needs every layer evaluated"));
    }
    const LayerSensitivity& layer = profile.layers[l];
    sensitivity.push_back(shrink_z > 0 ? std::max(0.0, layer.mean_kl - shrink_z * layer.std_error)
                                       : layer.mean_kl);
  }
  return sensitivity;
}

ApportionBounds ResponseBounds(ResponseSelector selector, const BudgetOptions& options) {
  ApportionBounds bounds{.min_tokens = std::max(options.min_tokens, MinResponseBudget(selector)),
                         .max_tokens = options.max_tokens};
  if (options.max_context) {
    bounds.max_tokens =
        std::min(bounds.max_tokens.value_or(*options.max_context), *options.max_context);
  }
  return bounds;
}

namespace {

// tokens[l] of a per-head map (BudgetMap::head_tokens): each layer's mean over its heads,
// apportioned by largest remainder to integers summing to `total`.
StatusOr<std::vector<int64_t>> LayerMeans(const std::vector<std::vector<int64_t>>& head_tokens,
                                          int64_t total) {
  std::vector<double> sums;
  for (const std::vector<int64_t>& heads : head_tokens) {
    int64_t sum = 0;
    for (int64_t b : heads) sum += b;
    sums.push_back(static_cast<double>(sum));
  }
  return Apportion(sums, total, {.min_tokens = 0});
}

// The response allocation of `profile` as a budget map (ComputeBudgetMap's response branch).
StatusOr<BudgetMap> ResponseBudgetMap(const SensitivityProfile& profile,
                                      const BudgetOptions& options) {
  // Per head: the L * H head curves, allocated as layer curves are, H * T tokens (the memory of
  // T tokens per layer, every head counted).
  ASSIGN_OR_RETURN(const AllocationCurves curves, AllocationCurvesOf(profile, options.per_head));
  const size_t L = curves.curves.size() / curves.heads;
  const ResponseSelector selector = profile.params.selector;
  // What the allocation does not read is recorded at its default, so that equal maps are equal
  // documents (a frozen map's version is the hash of its bytes).
  BudgetOptions resolved = options;
  resolved.ratio = 1.0;
  resolved.normalization = BudgetOptions{}.normalization;
  resolved.log_epsilon = BudgetOptions{}.log_epsilon;
  resolved.shrink_z = 0.0;
  RETURN_IF_ERROR(ValidateOptionsImpl(L, resolved));
  const ApportionBounds bounds = ResponseBounds(selector, resolved);
  if (bounds.min_tokens > resolved.min_tokens) {
    resolved.min_tokens = bounds.min_tokens;
    if (Status s = ValidateOptionsImpl(L, resolved); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), " (min_tokens raised to ", bounds.min_tokens,
                       ", the smallest budget ", Sv(ResponseSelectorName(selector)), " keeps)"));
    }
  }
  const int64_t total = TotalTokens(L, resolved);
  if (resolved.max_context &&
      static_cast<__int128>(L) * *resolved.max_context < static_cast<__int128>(total)) {
    return BudgetError(absl::StrCat("infeasible bounds: ", L, " layers x max_context ",
                                    *resolved.max_context, " < total ", total,
                                    " (a layer keeps at most the context)"));
  }
  BudgetMap map;
  map.model_hash = profile.model.hash;
  map.objective = Objective::kResponse;
  map.selector = selector;
  map.total_tokens = total;
  const __int128 allocated = static_cast<__int128>(total) * static_cast<__int128>(curves.heads);
  if (allocated > kMaxTotalTokens) {
    return BudgetError(absl::StrCat("total ", total, " x ", curves.heads, " KV heads exceeds ",
                                    kMaxTotalTokens, " tokens"));
  }
  ASSIGN_OR_RETURN(ResponseAllocation allocation,
                   AllocateByResponse(curves.curves, static_cast<int64_t>(allocated), bounds));
  if (options.per_head) {
    for (size_t l = 0; l < L; ++l) {
      const auto first = allocation.tokens.begin() + static_cast<ptrdiff_t>(l * curves.heads);
      map.head_tokens.emplace_back(first, first + static_cast<ptrdiff_t>(curves.heads));
    }
    ASSIGN_OR_RETURN(map.tokens, LayerMeans(map.head_tokens, total));
  } else {
    map.tokens = std::move(allocation.tokens);
  }
  const auto [fewest, most] = std::minmax_element(map.tokens.begin(), map.tokens.end());
  const double smallest = static_cast<double>(*fewest);
  resolved.ratio = static_cast<double>(*most) / smallest;
  map.options = resolved;
  const double log_ratio = std::log(resolved.ratio);
  for (int64_t tokens : map.tokens) {
    // The same division as the ratio's, so the largest multiplier is the ratio exactly.
    const double m = static_cast<double>(tokens) / smallest;
    map.multipliers.push_back(m);
    map.normalized.push_back(log_ratio > 0 ? std::clamp(std::log(m) / log_ratio, 0.0, 1.0) : 0.0);
  }
  return map;
}

}  // namespace

StatusOr<BudgetMap> ComputeBudgetMap(const SensitivityProfile& profile,
                                     const BudgetOptions& options) {
  if (profile.params.objective == Objective::kResponse) return ResponseBudgetMap(profile, options);
  if (options.per_head) {
    return absl::FailedPreconditionError(
        "budgets per KV head need a per-head response profile (`ripplekv calibrate --objective "
        "response --per-head`); this profile measured objective noise");
  }
  ASSIGN_OR_RETURN(std::vector<double> sensitivity, LayerSensitivities(profile, options.shrink_z));
  BudgetOptions raw = options;
  raw.shrink_z = 0.0;  // applied above; the sensitivities overload refuses it
  ASSIGN_OR_RETURN(BudgetMap map, ComputeBudgetMap(sensitivity, raw));
  map.options.shrink_z = options.shrink_z;
  map.model_hash = profile.model.hash;
  return map;
}

Status ValidateMapProfile(const SensitivityProfile& profile) {
  if (profile.params.objective == Objective::kResponse) return ResponseCurves(profile).status();
  return LayerSensitivities(profile).status();
}

}  // namespace ripplekv::method
