#include "method/profile_stability.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/strings.h"
#include "method/budget_map.h"
#include "method/resampling.h"

namespace ripplekv::method {
namespace {

// share_l = L * r^n_l / sum(r^n), n_l the budget map's min-max normalization of s (every s_l is
// a finite mean of validated non-negative values, so the normalization cannot fail).
std::vector<double> Shares(const std::vector<double>& s, double ratio) {
  std::vector<double> m = *NormalizeSensitivities(s, Normalization::kMinMax);
  double sum = 0.0;
  for (double& v : m) {
    v = std::pow(ratio, v);
    sum += v;
  }
  for (double& v : m) v *= static_cast<double>(s.size()) / sum;
  return m;
}

// Index of the largest value; ties go to the lower index.
size_t ArgMax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

StatusOr<ProfileStability> ComputeStability(const SensitivityProfile& profile,
                                            const StabilityOptions& options) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  if (options.resamples < 1) {
    return absl::InvalidArgumentError(
        Cat("stability: resamples must be >= 1, got ", options.resamples));
  }
  if (!(options.level > 0.0 && options.level < 1.0)) {
    return absl::InvalidArgumentError(
        Cat("stability: level must be in (0, 1), got ", options.level));
  }
  if (!(options.ratio >= 1.0) || !std::isfinite(options.ratio)) {
    return absl::InvalidArgumentError(
        Cat("stability: ratio must be finite and >= 1, got ", options.ratio));
  }
  if (!(options.tolerance >= 0.0) || !std::isfinite(options.tolerance)) {
    return absl::InvalidArgumentError(
        Cat("stability: tolerance must be finite and >= 0, got ", options.tolerance));
  }
  const auto n = static_cast<uint64_t>(profile.params.samples);
  if (n < 2) {
    return absl::InvalidArgumentError("stability: a profile of one sample has nothing to resample");
  }
  const size_t L = profile.layers.size();
  std::vector<double> s(L);
  for (size_t l = 0; l < L; ++l) s[l] = profile.layers[l].mean_kl;
  const std::vector<double> shares = Shares(s, options.ratio);
  const size_t top = ArgMax(s);

  const auto R = static_cast<size_t>(options.resamples);
  std::vector<std::vector<double>> kl(L, std::vector<double>(R));
  std::vector<std::vector<double>> share(L, std::vector<double>(R));
  std::vector<double> correlation(R);
  int64_t top_kept = 0;
  BootstrapDraw draw(options.seed);
  std::vector<uint64_t> picks(n);
  std::vector<double> replicate(L);
  for (size_t r = 0; r < R; ++r) {
    for (uint64_t& p : picks) p = draw.Index(n);
    for (size_t l = 0; l < L; ++l) {
      double sum = 0.0;
      for (uint64_t p : picks) sum += profile.layers[l].per_sample_mean[p];
      replicate[l] = sum / static_cast<double>(n);
      kl[l][r] = replicate[l];
    }
    const std::vector<double> rs = Shares(replicate, options.ratio);
    for (size_t l = 0; l < L; ++l) share[l][r] = rs[l];
    correlation[r] = SpearmanCorrelation(replicate, s);
    if (ArgMax(replicate) == top) ++top_kept;
  }

  const double q_low = (1.0 - options.level) / 2.0, q_high = (1.0 + options.level) / 2.0;
  ProfileStability st{.seed = options.seed,
                      .resamples = options.resamples,
                      .level = options.level,
                      .ratio = options.ratio,
                      .tolerance = options.tolerance};
  for (size_t l = 0; l < L; ++l) {
    std::sort(kl[l].begin(), kl[l].end());
    std::sort(share[l].begin(), share[l].end());
    LayerStability ls{.layer = profile.layers[l].layer,
                      .kl_low = SortedQuantile(kl[l], q_low),
                      .kl_high = SortedQuantile(kl[l], q_high),
                      .share = shares[l],
                      .share_low = SortedQuantile(share[l], q_low),
                      .share_high = SortedQuantile(share[l], q_high)};
    const double deviation = std::max(ls.share - ls.share_low, ls.share_high - ls.share) / ls.share;
    st.max_share_deviation = std::max(st.max_share_deviation, deviation);
    st.layers.push_back(ls);
  }
  std::sort(correlation.begin(), correlation.end());
  st.rank_correlation_median = SortedQuantile(correlation, 0.5);
  st.rank_correlation_low = SortedQuantile(correlation, q_low);
  st.top_layer = profile.layers[top].layer;
  st.top_layer_frequency = static_cast<double>(top_kept) / static_cast<double>(R);
  st.stable = st.max_share_deviation <= st.tolerance;
  return st;
}

}  // namespace ripplekv::method
