#include "cli/profile_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/strings.h"
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

namespace {

// The stability block's summary line.
void PrintStability(const method::SensitivityProfile& profile, const method::ProfileStability& st) {
  std::printf(
      "stability (bootstrap over %lld samples, %lld resamples, seed %llu): top layer %lld in "
      "%.0f%% of replicates; rank correlation median %.3f (%.0f%% above %.3f); budget shares "
      "within +-%.1f%% at %.0f%%: %s (target +-%.0f%%)\n",
      static_cast<long long>(profile.params.samples), static_cast<long long>(st.resamples),
      static_cast<unsigned long long>(st.seed), static_cast<long long>(st.top_layer),
      100 * st.top_layer_frequency, st.rank_correlation_median, 100 * (1 - (1 - st.level) / 2),
      st.rank_correlation_low, 100 * st.max_share_deviation, 100 * st.level,
      st.stable ? "stable" : "not stable", 100 * st.tolerance);
}

// The verification block: one summary line, then one line per disagreement.
void PrintVerification(const method::ProfileVerification& v) {
  std::printf(
      "verification (%g%% of tasks run again on a second worker): %llu tasks verified, %llu "
      "unverified (no second worker), %llu recomputed, %zu disagreement%s\n",
      100 * v.fraction, static_cast<unsigned long long>(v.tasks_verified),
      static_cast<unsigned long long>(v.tasks_unverified),
      static_cast<unsigned long long>(v.tasks_recomputed), v.disagreements.size(),
      v.disagreements.size() == 1 ? "" : "s");
  for (const method::ProfileVerification::Disagreement& d : v.disagreements) {
    std::printf("  sample %u layer %u: %s outvoted by %s (quarantined)\n", d.sample, d.layer,
                d.outvoted_worker.c_str(), absl::StrJoin(d.agreeing_workers, ", ").c_str());
  }
}

// What the profile measured, one line: the objective and its parameters.
void PrintObjective(const method::ProfileParams& p) {
  if (p.objective == method::Objective::kResponse) {
    std::printf(
        "objective response (selector %s, budgets %s tokens per KV head, %lld = full "
        "cache%s)\n",
        std::string(method::ResponseSelectorName(p.selector)).c_str(),
        absl::StrJoin(p.budgets, " ").c_str(), static_cast<long long>(p.context_len),
        p.kv_heads > 0 ? absl::StrCat("; each of ", p.kv_heads, " KV heads alone").c_str() : "");
    return;
  }
  std::printf("objective noise (mode %s, alpha %g, %lld trial%s)\n",
              std::string(method::PerturbModeName(p.mode)).c_str(), p.alpha,
              static_cast<long long>(p.trials), p.trials == 1 ? "" : "s");
}

// A response profile's points: one row per layer, the mean KL at each budget of the grid.
void PrintResponse(const method::SensitivityProfile& profile) {
  std::printf("KL by budget (nats)\n%5s", "layer");
  for (int64_t budget : profile.params.budgets) {
    std::printf("  %9lld", static_cast<long long>(budget));
  }
  std::printf("\n");
  for (const method::LayerSensitivity& l : profile.layers) {
    std::printf("%5lld", static_cast<long long>(l.layer));
    for (const method::ResponsePoint& point : l.response) std::printf("  %9.3g", point.mean_kl);
    std::printf("\n");
  }
  if (profile.params.kv_heads == 0) return;
  std::printf("KL by budget per KV head (nats; each layer's row above is their sum)\n%5s %4s",
              "layer", "head");
  for (int64_t budget : profile.params.budgets) {
    std::printf("  %9lld", static_cast<long long>(budget));
  }
  std::printf("\n");
  for (const method::LayerSensitivity& l : profile.layers) {
    for (size_t h = 0; h < l.head_response.size(); ++h) {
      std::printf("%5lld %4zu", static_cast<long long>(l.layer), h);
      for (const method::ResponsePoint& point : l.head_response[h]) {
        std::printf("  %9.3g", point.mean_kl);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

void PrintProfileTable(const method::SensitivityProfile& profile, double ratio) {
  std::vector<double> sens;
  for (const auto& l : profile.layers) sens.push_back(l.mean_kl);
  auto normalized = method::NormalizeSensitivities(sens, method::Normalization::kMinMax);
  double max_kl = 0;
  for (double s : sens) max_kl = std::max(max_kl, s);
  PrintObjective(profile.params);
  const std::optional<method::ProfileStability>& st = profile.stability;
  // The stability block's intervals, when the profile carries one: of the mean KL, and of the
  // layer's budget share b_l / B at the block's ratio.
  const std::string ci = st ? absl::StrCat(std::lround(100 * st->level), "% CI") : "";
  std::printf("%5s  %12s  %10s  %5s  %10s", "layer", "mean KL", "std err", "n", "multiplier");
  if (st) {
    std::printf("  %-23s  %-21s", absl::StrCat("KL ", ci).c_str(),
                absl::StrCat("share@r=", st->ratio, " ", ci).c_str());
  }
  std::printf("\n");
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const auto& l = profile.layers[i];
    const int bar = max_kl > 0 ? static_cast<int>(30 * l.mean_kl / max_kl + 0.5) : 0;
    const double m = normalized.ok() ? std::pow(ratio, (*normalized)[i]) : 1.0;
    std::printf("%5lld  %12.6g  %10.3g  %5lld  %10.3f", static_cast<long long>(l.layer), l.mean_kl,
                l.std_error, static_cast<long long>(l.count), m);
    if (st) {
      const method::LayerStability& s = st->layers[i];
      std::printf("  [%9.4g, %9.4g]  %.3f [%.3f, %.3f]", s.kl_low, s.kl_high, s.share, s.share_low,
                  s.share_high);
    }
    std::printf("  %s\n", std::string(bar, '#').c_str());
  }
  if (profile.params.objective == method::Objective::kResponse) PrintResponse(profile);
  if (st) PrintStability(profile, *st);
  if (profile.verification) PrintVerification(*profile.verification);
}

Status WriteProfilePlot(const method::SensitivityProfile& profile, double ratio,
                        const std::string& path) {
  std::vector<double> sens;
  for (const auto& l : profile.layers) sens.push_back(l.mean_kl);
  ASSIGN_OR_RETURN(std::vector<double> normalized,
                   method::NormalizeSensitivities(sens, method::Normalization::kMinMax));
  const method::ProfileParams& p = profile.params;
  ProfilePlotData plot;
  const std::string model_name =
      profile.model.name.empty() ? profile.model.architecture : profile.model.name;
  const std::string data =
      absl::StrCat(p.samples, " samples of C=", p.context_len, " W=", p.probe_len, ", model ",
                   profile.model.hash.substr(0, 12));
  if (p.objective == method::Objective::kResponse) {
    plot.title = absl::StrCat(model_name, " — compression response");
    plot.subtitle =
        absl::StrCat(Sv(method::ResponseSelectorName(p.selector)), " at budgets ",
                     absl::StrJoin(p.budgets, ", "), " (mean KL over the grid), ", data);
  } else {
    plot.title = absl::StrCat(model_name, " — value-cache sensitivity");
    plot.subtitle = absl::StrCat(Sv(method::PerturbModeName(p.mode)), " mode, alpha ", p.alpha,
                                 ", ", p.trials, " trials, ", data);
  }
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const auto& l = profile.layers[i];
    plot.layers.push_back(static_cast<int>(l.layer));
    plot.mean_kl.push_back(l.mean_kl);
    plot.stderr_kl.push_back(l.std_error);
    plot.multipliers.push_back(std::pow(ratio, normalized[i]));
  }
  plot.multiplier_label = absl::StrCat("budget multiplier r^n (r = ", ratio, ")");
  if (p.objective == method::Objective::kResponse) {
    // One line per compressed budget of the grid (the last, the full cache, is 0 everywhere), and
    // on the right axis the shares b_l / B of the map that minimizes the summed response at
    // B = kPlotAverage (the exponential mapping's multipliers mean nothing here).
    for (size_t t = 0; t + 1 < p.budgets.size(); ++t) {
      ProfilePlotData::ResponseSeries series{.label = absl::StrCat("b = ", p.budgets[t])};
      for (const auto& l : profile.layers) series.kl.push_back(l.response[t].mean_kl);
      plot.response.push_back(std::move(series));
    }
    constexpr int64_t kPlotAverage = 128;
    const int64_t average = std::clamp<int64_t>(kPlotAverage, p.budgets.front(), p.context_len);
    method::BudgetOptions options;
    options.average_tokens = average;
    StatusOr<method::BudgetMap> map = method::ComputeBudgetMap(profile, options);
    if (map.ok() && map->tokens.size() == profile.layers.size()) {
      plot.multipliers.clear();
      for (int64_t b : map->tokens) {
        plot.multipliers.push_back(static_cast<double>(b) / static_cast<double>(average));
      }
      plot.multiplier_label =
          absl::StrCat("budget share b_l / B of the response map, B = ", average);
    }
  }
  return WriteProfileSvg(plot, path);
}

}  // namespace ripplekv::cli
