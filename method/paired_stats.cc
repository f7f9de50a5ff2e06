#include "method/paired_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "base/strings.h"
#include "method/resampling.h"

namespace ripplekv::method {
namespace {

// Up to this n, sum_{k <= n/2} C(n, k) <= 2^(n-1) fits an uint64 exactly.
constexpr int64_t kExactBinomialMaxN = 60;

Status CheckFinite(std::span<const double> values, std::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(Cat(what, "[", i, "] is not finite (", values[i], ")"));
    }
  }
  return absl::OkStatus();
}

// sum_{k=0}^{m} C(n, k) for n <= kExactBinomialMaxN, m <= n / 2, in exact integers: row n of
// Pascal's triangle, built by additions only.
uint64_t LowerBinomialSum(int64_t n, int64_t m) {
  std::vector<uint64_t> row(static_cast<size_t>(n) + 1, 0);
  row[0] = 1;
  for (int64_t i = 1; i <= n; ++i) {
    for (int64_t k = i; k >= 1; --k) row[k] += row[k - 1];
  }
  uint64_t sum = 0;
  for (int64_t k = 0; k <= m; ++k) sum += row[k];
  return sum;
}

// P(W+ <= w) * 2^n under the null, for ranks 1..n without ties: the number of subsets of {1..n}
// whose sum is at most w.
uint64_t SubsetsWithSumAtMost(int64_t n, int64_t w) {
  const int64_t max_sum = n * (n + 1) / 2;
  std::vector<uint64_t> count(static_cast<size_t>(max_sum) + 1, 0);  // count[s] = c_k(s)
  count[0] = 1;
  for (int64_t k = 1; k <= n; ++k) {
    for (int64_t s = k * (k + 1) / 2; s >= k; --s) count[s] += count[s - k];
  }
  uint64_t total = 0;
  for (int64_t s = 0; s <= std::min(w, max_sum); ++s) total += count[s];
  return total;
}

}  // namespace

double SignTestPValue(int64_t wins, int64_t losses) {
  RIPPLEKV_CHECK(wins >= 0 && losses >= 0 && wins + losses <= 1'000'000'000);
  const int64_t n = wins + losses;
  if (n == 0) return 1.0;
  const int64_t m = std::min(wins, losses);
  if (n <= kExactBinomialMaxN) {
    // 2 * sum / 2^n; the sum converts to double with one rounding, the scaling is exact.
    const double p =
        std::ldexp(static_cast<double>(LowerBinomialSum(n, m)), static_cast<int>(1 - n));
    return std::min(1.0, p);
  }
  const double nd = static_cast<double>(n);
  const double md = static_cast<double>(m);
  // log of the largest term, C(n, m) / 2^n.
  const double log_top = std::lgamma(nd + 1.0) - std::lgamma(md + 1.0) -
                         std::lgamma(nd - md + 1.0) - nd * std::log(2.0);
  // sum_{k <= m} C(n, k) / C(n, m): the ratios shrink geometrically below the mode.
  double term = 1.0;
  double ratio_sum = 1.0;
  for (int64_t k = m; k >= 1; --k) {
    term *= static_cast<double>(k) / static_cast<double>(n - k + 1);
    ratio_sum += term;
    if (term < 1e-18 * ratio_sum) break;
  }
  return std::min(1.0, 2.0 * std::exp(log_top + std::log(ratio_sum)));
}

StatusOr<WilcoxonResult> WilcoxonSignedRank(std::span<const double> differences) {
  RETURN_IF_ERROR(CheckFinite(differences, "difference"));
  std::vector<double> magnitude;
  std::vector<bool> positive;
  for (double d : differences) {
    if (d == 0.0) continue;
    magnitude.push_back(std::fabs(d));
    positive.push_back(d > 0.0);
  }
  WilcoxonResult result;
  result.n = static_cast<int64_t>(magnitude.size());
  if (result.n == 0) {
    result.exact = true;
    return result;
  }
  double tie_term = 0.0;
  const std::vector<double> ranks = AverageRanks(magnitude, &tie_term);
  for (size_t i = 0; i < ranks.size(); ++i)
    (positive[i] ? result.w_plus : result.w_minus) += ranks[i];

  const double n = static_cast<double>(result.n);
  if (result.n <= kWilcoxonExactMaxPairs && tie_term == 0.0) {
    // Without ties every rank is an integer, and so are W+ and W-.
    const auto w_min = static_cast<int64_t>(std::min(result.w_plus, result.w_minus));
    const uint64_t tail = SubsetsWithSumAtMost(result.n, w_min);
    result.p_value =
        std::min(1.0, std::ldexp(static_cast<double>(tail), static_cast<int>(1 - result.n)));
    result.exact = true;
    return result;
  }
  const double mean = n * (n + 1.0) / 4.0;
  const double var = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - tie_term / 48.0;
  const double z = std::max(0.0, std::fabs(result.w_plus - mean) - 0.5) / std::sqrt(var);
  result.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  result.exact = false;
  return result;
}

StatusOr<Interval> PairedBootstrapInterval(std::span<const double> differences,
                                           const BootstrapOptions& options) {
  if (differences.empty()) {
    return absl::InvalidArgumentError("bootstrap: no differences to resample");
  }
  RETURN_IF_ERROR(CheckFinite(differences, "difference"));
  if (options.resamples < 1) {
    return absl::InvalidArgumentError(
        Cat("bootstrap: resamples must be at least 1, got ", options.resamples));
  }
  if (!(options.alpha > 0.0 && options.alpha < 1.0)) {
    return absl::InvalidArgumentError(
        Cat("bootstrap: alpha must be in (0, 1), got ", options.alpha));
  }
  const auto n = static_cast<uint64_t>(differences.size());
  BootstrapDraw draw(options.seed);
  std::vector<double> means(static_cast<size_t>(options.resamples));
  for (double& mean : means) {
    double sum = 0.0;
    for (uint64_t i = 0; i < n; ++i) sum += differences[draw.Index(n)];
    mean = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return Interval{.low = SortedQuantile(means, options.alpha / 2.0),
                  .high = SortedQuantile(means, 1.0 - options.alpha / 2.0)};
}

StatusOr<std::vector<double>> HolmAdjust(std::span<const double> p_values) {
  for (size_t i = 0; i < p_values.size(); ++i) {
    if (!(p_values[i] >= 0.0 && p_values[i] <= 1.0)) {
      return absl::InvalidArgumentError(
          Cat("p-value [", i, "] is not in [0, 1] (", p_values[i], ")"));
    }
  }
  std::vector<size_t> order(p_values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p_values[a] < p_values[b]; });
  std::vector<double> adjusted(p_values.size());
  const double m = static_cast<double>(p_values.size());
  double running_max = 0.0;
  for (size_t j = 0; j < order.size(); ++j) {
    running_max = std::max(running_max, (m - static_cast<double>(j)) * p_values[order[j]]);
    adjusted[order[j]] = std::min(1.0, running_max);
  }
  return adjusted;
}

double MeanDifference(std::span<const double> differences) {
  if (differences.empty()) return 0.0;
  double sum = 0.0;
  for (double d : differences) sum += d;
  return sum / static_cast<double>(differences.size());
}

double CohenDz(std::span<const double> differences) {
  if (differences.size() < 2) return 0.0;
  const auto [lo, hi] = std::minmax_element(differences.begin(), differences.end());
  if (*lo == *hi) return 0.0;
  const double mean = MeanDifference(differences);
  double squares = 0.0;
  for (double d : differences) squares += (d - mean) * (d - mean);
  return mean / std::sqrt(squares / static_cast<double>(differences.size() - 1));
}

double RankBiserial(const WilcoxonResult& wilcoxon) {
  const double total = wilcoxon.w_plus + wilcoxon.w_minus;
  return total > 0.0 ? (wilcoxon.w_plus - wilcoxon.w_minus) / total : 0.0;
}

}  // namespace ripplekv::method
