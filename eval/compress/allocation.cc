#include "eval/compress/allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "base/strings.h"
#include "method/apportion.h"

namespace ripplekv::eval {

StatusOr<int64_t> TotalBudget(int n_layers, int average, BudgetBounds b) {
  if (n_layers < 1) return absl::InvalidArgumentError(Cat("n_layers must be >= 1, got ", n_layers));
  if (average < 0)
    return absl::InvalidArgumentError(Cat("average budget must be >= 0, got ", average));
  if (b.min_budget < 0 || b.min_budget > b.max_budget) {
    return absl::InvalidArgumentError(
        Cat("budget bounds [", b.min_budget, ", ", b.max_budget, "] are empty or negative"));
  }
  if (average < b.min_budget && average < b.max_budget) {
    return absl::InvalidArgumentError(Cat("average budget ", average,
                                          " tokens is below the selection's minimum of ",
                                          b.min_budget, " tokens per layer"));
  }
  return static_cast<int64_t>(n_layers) * std::min(average, b.max_budget);
}

StatusOr<std::vector<int>> FitBudgets(std::span<const double> targets, int64_t total,
                                      BudgetBounds b) {
  StatusOr<std::vector<int64_t>> tokens =
      method::Apportion(targets, total, {.min_tokens = b.min_budget, .max_tokens = b.max_budget});
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(Cat("FitBudgets: ", std::string(tokens.status().message())));
  }
  return std::vector<int>(tokens->begin(), tokens->end());  // each in [min, max], so fits an int
}

StatusOr<std::vector<int>> UniformBudgets(int n_layers, int average, BudgetBounds b) {
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  return FitBudgets(std::vector<double>(n_layers, 1.0), total, b);
}

StatusOr<std::vector<int>> PyramidBudgets(int n_layers, int average, int window, double beta,
                                          BudgetBounds b) {
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  if (!(beta >= 1.0) || !std::isfinite(beta)) {
    return absl::InvalidArgumentError(Cat("pyramid beta must be finite and >= 1, got ", beta));
  }
  if (window < 0) return absl::InvalidArgumentError(Cat("window must be >= 0, got ", window));
  const int n = b.max_budget;
  const int w = std::min(window, n);
  if (average >= n || n_layers == 1) return UniformBudgets(n_layers, average, b);
  // No prefix budget to schedule (B <= w), or the reference's uniform fallback for prompts
  // shorter than twice the prefix budget.
  const int64_t prefix = static_cast<int64_t>(average) - w;
  if (prefix <= 0 || n < 2 * prefix) return UniformBudgets(n_layers, average, b);
  const double p = static_cast<double>(prefix);
  double min_num = p / beta;
  double max_num = 2.0 * p - min_num;
  if (max_num > n - w) {
    max_num = n - w;
    min_num = 2.0 * p - max_num;
  }
  const double step = (max_num - min_num) / (n_layers - 1);
  std::vector<double> targets(n_layers);
  for (int l = 0; l < n_layers; ++l) targets[l] = w + max_num - l * step;
  return FitBudgets(targets, total, b);
}

StatusOr<std::vector<double>> CakePreferences(std::span<const LayerStats> layers, double tau1,
                                              double tau2) {
  if (!(tau1 > 0.0) || !(tau2 > 0.0) || !std::isfinite(tau1) || !std::isfinite(tau2)) {
    return absl::InvalidArgumentError(
        Cat("CAKE temperatures must be finite and > 0, got tau1 = ", tau1, ", tau2 = ", tau2));
  }
  std::vector<double> pref(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    if (!layers[l].has_window()) {
      return absl::FailedPreconditionError(
          Cat("CAKE: layer ", l, " has no window statistics (prefill without window_stats)"));
    }
    RETURN_IF_ERROR(CheckLayerStats(layers[l]));
    const double h = std::max(0.0, layers[l].window_entropy);
    pref[l] = std::pow(h, 1.0 / tau1) * std::pow(TemporalShift(layers[l]), 1.0 / tau2);
  }
  return pref;
}

std::vector<int64_t> CakeAdjustBudgets(std::span<const int64_t> budgets, int64_t total,
                                       int64_t cap) {
  std::vector<int64_t> b(budgets.begin(), budgets.end());
  // Adds `amount` (> 0) times `sign` evenly over the layers in `valid`, the remainder one each to
  // the first of them in layer order.
  auto spread = [&b](const std::vector<size_t>& valid, int64_t amount, int64_t sign) {
    if (valid.empty()) return;
    const int64_t k = static_cast<int64_t>(valid.size());
    const int64_t each = amount / k, remainder = amount % k;
    for (int64_t i = 0; i < k; ++i) b[valid[i]] += sign * (each + (i < remainder ? 1 : 0));
  };
  auto layers_where = [&b](auto predicate) {
    std::vector<size_t> valid;
    for (size_t l = 0; l < b.size(); ++l) {
      if (predicate(b[l])) valid.push_back(l);
    }
    return valid;
  };
  int64_t excess = 0;
  for (int64_t& x : b) {
    if (x > cap) {
      excess += x - cap;
      x = cap;
    }
  }
  if (excess > 0) spread(layers_where([cap](int64_t x) { return x < cap; }), excess, +1);
  const int64_t diff = total - std::accumulate(b.begin(), b.end(), int64_t{0});
  if (diff > 0) spread(layers_where([cap](int64_t x) { return x < cap; }), diff, +1);
  if (diff < 0) spread(layers_where([](int64_t x) { return x > 1; }), -diff, -1);
  return b;
}

StatusOr<std::vector<int>> CakeBudgets(std::span<const double> preferences, int average, int window,
                                       BudgetBounds b) {
  const int n_layers = static_cast<int>(preferences.size());
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  if (window < 0) return absl::InvalidArgumentError(Cat("window must be >= 0, got ", window));
  const int n = b.max_budget;
  if (average >= n || average <= window) return UniformBudgets(n_layers, average, b);
  // From here on w < B < n: the prefix budget T is positive and below L times the cap n - w.
  const int64_t w = window;
  const int64_t prefix_total = (average - w) * n_layers;
  double sum = 0.0;
  bool valid = true;
  for (double p : preferences) {
    valid = valid && std::isfinite(p) && p >= 0.0;
    sum += p;
  }
  valid = valid && sum > 0.0 && std::isfinite(sum);
  std::vector<int64_t> shares(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    // Same operation order as the reference (P / sum * T), truncated as numpy's dtype=int.
    shares[l] = valid
                    ? static_cast<int64_t>(preferences[l] / sum * static_cast<double>(prefix_total))
                    : prefix_total / n_layers;
  }
  const std::vector<int64_t> adjusted = CakeAdjustBudgets(shares, prefix_total, n - w);
  std::vector<int> kept(n_layers);
  bool fits = true;
  int64_t kept_total = 0;
  for (int l = 0; l < n_layers; ++l) {
    const int64_t v = w + adjusted[l];
    fits = fits && v >= b.min_budget && v <= n;
    kept_total += v;
    kept[l] = static_cast<int>(std::clamp<int64_t>(v, 0, n));
  }
  if (fits && kept_total == total) return kept;  // the total is always exact here (allocation.h)
  // The corner cases: a layer lifted above n by the even spread, or one below a selection minimum
  // larger than the window. Re-apportioned around the reference's result.
  std::vector<double> targets(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    targets[l] = static_cast<double>(std::max<int64_t>(w + adjusted[l], 0));
  }
  return FitBudgets(targets, total, b);
}

StatusOr<std::vector<int>> MapBudgets(std::span<const int> map, int average, BudgetBounds b) {
  const int n_layers = static_cast<int>(map.size());
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  int64_t map_total = 0;
  for (int l = 0; l < n_layers; ++l) {
    if (map[l] < 0) {
      return absl::InvalidArgumentError(Cat("budget map: layer ", l, " has budget ", map[l]));
    }
    map_total += map[l];
  }
  const int64_t expected = static_cast<int64_t>(n_layers) * average;
  if (map_total != expected) {
    return absl::InvalidArgumentError(Cat("budget map totals ", map_total, " tokens over ",
                                          n_layers, " layers; average budget ", average,
                                          " needs exactly ", expected));
  }
  // Exactly as given when it fits: same total, every layer within the bounds.
  const bool fits = map_total == total && std::all_of(map.begin(), map.end(), [&](int v) {
                      return v >= b.min_budget && v <= b.max_budget;
                    });
  if (fits) return std::vector<int>(map.begin(), map.end());
  std::vector<double> targets(map.begin(), map.end());
  return FitBudgets(targets, total, b);
}

}  // namespace ripplekv::eval
