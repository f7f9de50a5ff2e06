#include "method/budget_map.h"
#include "kernels/base/strings.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/base/check.h"

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
  std::vector<double> n(L, 0.0);
  if (std::adjacent_find(s.begin(), s.end(), std::not_equal_to<>()) == s.end()) {
    return n;  // flat (or a single layer): all zeros, as in the other modes
  }
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
  for (size_t i = 0; i < L;) {
    size_t j = i;
    while (j < L && s[order[j]] == s[order[i]]) ++j;
    // Positions i..j-1 hold equal values: average rank (i + j - 1) / 2.
    const double rank = 0.5 * static_cast<double>(i + j - 1);
    for (size_t k = i; k < j; ++k) n[order[k]] = rank / static_cast<double>(L - 1);
    i = j;
  }
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

// Steps 3-4: b_l = clamp(lambda * m_l, lo, hi) with lambda such that sum(b) == total (exactly, up
// to floating-point rounding). Each round spreads what the fixed layers leave over the free ones
// in proportion to m, then fixes violators at their bound. Which violators are fixed follows the
// sign of their net excess E = sum(bound - b): E > 0 means the free layers must shrink (lambda
// falls), so layers below lo now stay below lo and are fixed at lo, while a layer above hi may come
// back inside and is left free; E < 0 is the mirror case; E == 0 fixes both. Every round fixes at
// least one layer, so there are at most L + 1 rounds, and no fixed layer is ever released.
// Only the proportions of m matter, so they are scaled into (0, 1] first: with a ratio near the
// top of the double range, m_l (up to r) or their sum would overflow to infinity, and so would
// remaining * m_l long before. Each budget is remaining times a fraction in (0, 1].
std::vector<double> WaterFill(const std::vector<double>& multipliers, int64_t total, int64_t lo,
                              std::optional<int64_t> hi) {
  const size_t L = multipliers.size();
  const double m_max = *std::max_element(multipliers.begin(), multipliers.end());
  std::vector<double> m(L);  // m_l / max m: >= 1 / r > 0, as every m_l >= 1
  for (size_t l = 0; l < L; ++l) m[l] = multipliers[l] / m_max;
  std::vector<double> b(L, 0.0);
  std::vector<bool> fixed(L, false);
  int64_t fixed_total = 0;  // integer bounds, so exact
  std::vector<size_t> lows, highs;
  for (size_t round = 0; round <= L; ++round) {
    double m_free = 0.0;
    for (size_t l = 0; l < L; ++l) {
      if (!fixed[l]) m_free += m[l];
    }
    if (m_free == 0.0) break;  // every layer fixed
    const double remaining = static_cast<double>(total - fixed_total);
    lows.clear();
    highs.clear();
    double excess = 0.0;
    for (size_t l = 0; l < L; ++l) {
      if (fixed[l]) continue;
      b[l] = remaining * (m[l] / m_free);
      if (b[l] < static_cast<double>(lo)) {
        excess += static_cast<double>(lo) - b[l];
        lows.push_back(l);
      } else if (hi && b[l] > static_cast<double>(*hi)) {
        excess += static_cast<double>(*hi) - b[l];
        highs.push_back(l);
      }
    }
    if (lows.empty() && highs.empty()) break;
    if (excess >= 0) {
      for (size_t l : lows) {
        b[l] = static_cast<double>(lo);
        fixed[l] = true;
        fixed_total += lo;
      }
    }
    if (excess <= 0) {
      for (size_t l : highs) {
        b[l] = static_cast<double>(*hi);
        fixed[l] = true;
        fixed_total += *hi;
      }
    }
  }
  return b;
}

// Step 5: integers in [lo, hi] summing to exactly `total`, by largest remainder. Equal remainders
// go to the more sensitive layer first, then to the lower index, so budgets never order against
// sensitivity (with r = 1 or a near-flat profile, equal remainders are common). Each value is
// first clamped into [lo, hi] (water-filling can leave a free layer an ulp outside), so floors are
// >= lo and a layer below hi has room for its extra token.
std::vector<int64_t> RoundLargestRemainder(const std::vector<double>& b,
                                           std::span<const double> sensitivity, int64_t total,
                                           int64_t lo, std::optional<int64_t> hi) {
  const size_t L = b.size();
  const double dlo = static_cast<double>(lo);
  std::vector<int64_t> tokens(L);
  std::vector<double> remainder(L);
  int64_t sum = 0;
  for (size_t l = 0; l < L; ++l) {
    double v = std::max(b[l], dlo);
    if (hi) v = std::min(v, static_cast<double>(*hi));
    const double f = std::floor(v);
    tokens[l] = static_cast<int64_t>(f);
    remainder[l] = v - f;
    sum += tokens[l];
  }
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest remainder first, then the more sensitive layer; stable, so full ties keep ascending
  // layer order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    if (remainder[a] != remainder[c]) return remainder[a] > remainder[c];
    return sensitivity[a] > sensitivity[c];
  });
  // The water-filled values sum to `total` up to rounding error, so the floors fall short by
  // fewer than L tokens (or overshoot by a hair); anything else is a bug in WaterFill.
  int64_t deficit = total - sum;
  RIPPLEKV_CHECK(deficit <= static_cast<int64_t>(L) && deficit >= -1);
  for (size_t l : order) {
    if (deficit <= 0) break;
    if (hi && tokens[l] >= *hi) continue;
    ++tokens[l];
    --deficit;
  }
  for (auto it = order.rbegin(); it != order.rend() && deficit < 0; ++it) {
    if (tokens[*it] <= lo) continue;
    --tokens[*it];
    ++deficit;
  }
  RIPPLEKV_CHECK(deficit == 0);
  return tokens;
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
  const std::vector<double> real =
      WaterFill(map.multipliers, map.total_tokens, options.min_tokens, options.max_tokens);
  map.tokens = RoundLargestRemainder(real, sensitivity, map.total_tokens, options.min_tokens,
                                     options.max_tokens);
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

StatusOr<BudgetMap> ComputeBudgetMap(const SensitivityProfile& profile,
                                     const BudgetOptions& options) {
  RETURN_IF_ERROR(ValidateProfile(profile));
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
    sensitivity.push_back(profile.layers[l].mean_kl);
  }
  ASSIGN_OR_RETURN(BudgetMap map, ComputeBudgetMap(sensitivity, options));
  map.model_hash = profile.model.hash;
  return map;
}

}  // namespace ripplekv::method
