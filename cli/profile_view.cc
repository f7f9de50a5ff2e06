#include "cli/profile_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/profile_plot.h"
#include "method/budget_map.h"

namespace ripplekv::cli {

StatusOr<std::vector<int>> ParseLayerList(const std::string& text) {
  std::vector<int> layers;
  if (text.empty()) return layers;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    const bool ok =
        (range.size() == 1 && absl::SimpleAtoi(range[0], &lo) && (hi = lo, true)) ||
        (range.size() == 2 && absl::SimpleAtoi(range[0], &lo) && absl::SimpleAtoi(range[1], &hi));
    if (!ok || lo < 0 || lo > hi || hi - lo > 100000) {
      return absl::InvalidArgumentError(
          absl::StrCat("--layers: cannot parse '", part, "' (expected e.g. 0-3,7)"));
    }
    for (int l = lo; l <= hi; ++l) layers.push_back(l);
  }
  return layers;
}

void PrintProfileTable(const method::SensitivityProfile& profile, double ratio) {
  std::vector<double> sens;
  for (const auto& l : profile.layers) sens.push_back(l.mean_kl);
  auto normalized = method::NormalizeSensitivities(sens, method::Normalization::kMinMax);
  double max_kl = 0;
  for (double s : sens) max_kl = std::max(max_kl, s);
  std::printf("%5s  %12s  %10s  %5s  %10s  %s\n", "layer", "mean KL", "std err", "n", "multiplier",
              "");
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const auto& l = profile.layers[i];
    const int bar = max_kl > 0 ? static_cast<int>(30 * l.mean_kl / max_kl + 0.5) : 0;
    const double m = normalized.ok() ? std::pow(ratio, (*normalized)[i]) : 1.0;
    std::printf("%5lld  %12.6g  %10.3g  %5lld  %10.3f  %s\n", static_cast<long long>(l.layer),
                l.mean_kl, l.std_error, static_cast<long long>(l.count), m,
                std::string(bar, '#').c_str());
  }
}

Status WriteProfilePlot(const method::SensitivityProfile& profile, double ratio,
                        const std::string& path) {
  std::vector<double> sens;
  for (const auto& l : profile.layers) sens.push_back(l.mean_kl);
  ASSIGN_OR_RETURN(std::vector<double> normalized,
                   method::NormalizeSensitivities(sens, method::Normalization::kMinMax));
  const method::ProfileParams& p = profile.params;
  ProfilePlotData plot;
  plot.title =
      absl::StrCat(profile.model.name.empty() ? profile.model.architecture : profile.model.name,
                   " — value-cache sensitivity");
  plot.subtitle =
      absl::StrCat(p.mode == method::PerturbMode::kCache ? "cache" : "prefill", " mode, alpha ",
                   p.alpha, ", ", p.trials, " trials, ", p.samples, " samples of C=", p.context_len,
                   " W=", p.probe_len, ", model ", profile.model.hash.substr(0, 12));
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const auto& l = profile.layers[i];
    plot.layers.push_back(static_cast<int>(l.layer));
    plot.mean_kl.push_back(l.mean_kl);
    plot.stderr_kl.push_back(l.std_error);
    plot.multipliers.push_back(std::pow(ratio, normalized[i]));
  }
  plot.multiplier_label = absl::StrCat("budget multiplier r^n (r = ", ratio, ")");
  return WriteProfileSvg(plot, path);
}

}  // namespace ripplekv::cli
