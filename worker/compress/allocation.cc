#include "worker/compress/allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/base/strings.h"

namespace ripplekv::worker {

namespace {

// Tolerance when flooring a real budget that should be an integer (e.g. 40 computed as
// 39.999999999): far below any real remainder, far above double rounding on token counts.
constexpr double kFloorSlack = 1e-9;
constexpr int kBisectionSteps = 200;

// Real budgets clamp(c * t_l, lo, hi) whose sum is `total`: bisection for c, then the exact c for
// the layers left strictly inside the bounds.
std::vector<double> WaterFill(std::vector<double> t, int64_t total, double lo, double hi) {
  const double t_max = *std::max_element(t.begin(), t.end());
  if (t_max <= 0.0) {
    std::fill(t.begin(), t.end(), 1.0);
  } else {
    for (double& v : t) v = std::max(v, t_max * 1e-12);  // a zero share still reaches hi
  }
  auto filled = [&](double c) {
    double s = 0.0;
    for (double v : t) s += std::clamp(c * v, lo, hi);
    return s;
  };
  const double target = static_cast<double>(total);
  double c_lo = 0.0, c_hi = 1.0;
  while (filled(c_hi) < target) c_hi *= 2.0;
  for (int i = 0; i < kBisectionSteps; ++i) {
    const double mid = 0.5 * (c_lo + c_hi);
    if (mid <= c_lo || mid >= c_hi) break;
    (filled(mid) < target ? c_lo : c_hi) = mid;
  }
  double fixed = 0.0, free_t = 0.0;
  for (double v : t) {
    const double x = c_hi * v;
    if (x <= lo) {
      fixed += lo;
    } else if (x >= hi) {
      fixed += hi;
    } else {
      free_t += v;
    }
  }
  const double c = free_t > 0.0 ? (target - fixed) / free_t : c_hi;
  std::vector<double> r(t.size());
  for (size_t l = 0; l < t.size(); ++l) {
    const double x = c_hi * t[l];
    r[l] = x <= lo ? lo : x >= hi ? hi : std::clamp(c * t[l], lo, hi);
  }
  return r;
}

}  // namespace

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
  const int n = static_cast<int>(targets.size());
  if (n == 0) return absl::InvalidArgumentError("FitBudgets: no layers");
  const int lo = b.min_budget, hi = b.max_budget;
  if (lo < 0 || lo > hi) {
    return absl::InvalidArgumentError(Cat("FitBudgets: bounds [", lo, ", ", hi, "] are empty"));
  }
  if (total < static_cast<int64_t>(n) * lo || total > static_cast<int64_t>(n) * hi) {
    return absl::InvalidArgumentError(Cat("FitBudgets: a total of ", total, " tokens over ", n,
                                          " layers is outside [", static_cast<int64_t>(n) * lo,
                                          ", ", static_cast<int64_t>(n) * hi, "]"));
  }
  double sum = 0.0;
  bool inside = true;
  for (int l = 0; l < n; ++l) {
    if (!std::isfinite(targets[l]) || targets[l] < 0.0) {
      return absl::InvalidArgumentError(
          Cat("FitBudgets: layer ", l, " has target ", targets[l], " (must be finite and >= 0)"));
    }
    sum += targets[l];
    inside = inside && targets[l] >= lo && targets[l] <= hi;
  }
  const std::vector<double> real =
      inside && sum == static_cast<double>(total)
          ? std::vector<double>(targets.begin(), targets.end())
          : WaterFill(std::vector<double>(targets.begin(), targets.end()), total, lo, hi);

  // Largest remainder, with a repair loop that also absorbs any floating-point excess.
  std::vector<int> out(n);
  std::vector<double> rem(n);
  int64_t assigned = 0;
  for (int l = 0; l < n; ++l) {
    out[l] = std::clamp(static_cast<int>(std::floor(real[l] + kFloorSlack)), lo, hi);
    rem[l] = real[l] - out[l];
    assigned += out[l];
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  int64_t diff = total - assigned;
  if (diff > 0) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return rem[a] > rem[c]; });
  } else if (diff < 0) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return rem[a] < rem[c]; });
  }
  while (diff != 0) {  // terminates: the total is feasible, so some layer can always move
    for (int l : order) {
      if (diff > 0 && out[l] < hi) {
        ++out[l];
        --diff;
      } else if (diff < 0 && out[l] > lo) {
        --out[l];
        ++diff;
      }
      if (diff == 0) break;
    }
  }
  return out;
}

StatusOr<std::vector<int>> UniformBudgets(int n_layers, int average, BudgetBounds b) {
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  return std::vector<int>(n_layers, static_cast<int>(total / n_layers));
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
  const double p = average - w;  // >= 0: TotalBudget checked average >= min_budget = w
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

StatusOr<std::vector<int>> CakeBudgets(std::span<const double> preferences, int average,
                                       BudgetBounds b) {
  const int n_layers = static_cast<int>(preferences.size());
  ASSIGN_OR_RETURN(const int64_t total, TotalBudget(n_layers, average, b));
  double sum = 0.0;
  bool finite = true;
  for (double p : preferences) {
    finite = finite && std::isfinite(p) && p >= 0.0;
    sum += p;
  }
  if (!finite || !(sum > 0.0) || !std::isfinite(sum)) return UniformBudgets(n_layers, average, b);
  std::vector<double> targets(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    targets[l] = static_cast<double>(total) * preferences[l] / sum;
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
  std::vector<double> targets(map.begin(), map.end());
  return FitBudgets(targets, total, b);
}

}  // namespace ripplekv::worker
