#include "method/profile_aggregate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "method/profile_stability.h"

namespace ripplekv::method {
namespace {

std::string Key(const TrialKl& r) {
  return absl::StrCat("(sample ", r.sample, ", layer ", r.layer, ", trial ", r.trial, ")");
}

bool CanonicalLess(const TrialKl& a, const TrialKl& b) {
  return std::tie(a.sample, a.layer, a.trial) < std::tie(b.sample, b.layer, b.trial);
}

// The standard error of the mean of `values` (n - 1 denominator) / sqrt(n), 0 for one value.
double StandardError(const std::vector<double>& values, double mean) {
  const size_t n = values.size();
  if (n < 2) return 0.0;
  double squares = 0.0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(n - 1)) / std::sqrt(static_cast<double>(n));
}

// A layer's response points: its own (per layer: trial g; per head: per sample the sum over its
// heads) and, for a per-head response, each head's.
struct LayerResponse {
  std::vector<ResponsePoint> layer;
  std::vector<std::vector<ResponsePoint>> heads;
};
// layer -> its response points.
using LayerResponses = std::map<int64_t, LayerResponse>;

// The point at `budget` of per-sample values `kl` (ascending sample order): their mean and its
// standard error.
ResponsePoint PointOf(int64_t budget, const std::vector<double>& kl) {
  double sum = 0.0;
  for (double v : kl) sum += v;
  const double mean = sum / static_cast<double>(kl.size());
  return {.budget = budget, .mean_kl = mean, .std_error = StandardError(kl, mean)};
}

// Per layer (ascending), the response points of a grid `budgets` measured per layer (kv_heads 0:
// trial g is budget g) or per KV head (trial h * G + g is head h at budget g): for each trial the
// mean over samples of KL(s, l, t) and its standard error, summed in canonical order; a per-head
// layer point is the same of the per-sample sums over heads (heads ascending). The results passed
// AggregateProfile (a complete grid without repeats), so with trials == max(1, kv_heads) * G every
// (sample, layer) holds exactly the trials 0 .. trials - 1.
StatusOr<LayerResponses> ResponsePoints(std::span<const TrialKl> results,
                                        const std::vector<int64_t>& budgets, int64_t kv_heads) {
  const size_t grid = budgets.size();
  const size_t heads = static_cast<size_t>(std::max<int64_t>(1, kv_heads));
  std::vector<TrialKl> sorted(results.begin(), results.end());
  std::sort(sorted.begin(), sorted.end(), CanonicalLess);
  // layer -> trial -> the trial's KL of each sample, in ascending sample order.
  std::map<int64_t, std::vector<std::vector<double>>> values;
  for (const TrialKl& r : sorted) {
    if (r.trial >= static_cast<int64_t>(heads * grid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate: ", Key(r), " is past the response grid's ", grid, " budgets",
                       kv_heads > 0 ? absl::StrCat(" x ", kv_heads, " KV heads") : std::string()));
    }
    std::vector<std::vector<double>>& trials = values[r.layer];
    trials.resize(heads * grid);
    trials[r.trial].push_back(r.kl);
  }
  LayerResponses out;
  for (const auto& [layer, trials] : values) {
    LayerResponse& response = out[layer];
    for (size_t g = 0; g < grid; ++g) {
      if (kv_heads == 0) {
        response.layer.push_back(PointOf(budgets[g], trials[g]));
        continue;
      }
      std::vector<double> sums(trials[g].size(), 0.0);
      for (size_t h = 0; h < heads; ++h) {
        const std::vector<double>& kl = trials[h * grid + g];
        for (size_t s = 0; s < sums.size(); ++s) sums[s] += kl[s];
      }
      response.layer.push_back(PointOf(budgets[g], sums));
    }
    if (kv_heads == 0) continue;
    response.heads.resize(heads);
    for (size_t h = 0; h < heads; ++h) {
      for (size_t g = 0; g < grid; ++g) {
        response.heads[h].push_back(PointOf(budgets[g], trials[h * grid + g]));
      }
    }
  }
  return out;
}

}  // namespace

Status CheckTrialKl(double kl) {
  if (std::isfinite(kl) && kl >= 0 && kl <= kMaxTrialKl) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("KL ", kl, " must be finite, >= 0 and <= ", kMaxTrialKl, " nats"));
}

StatusOr<std::vector<LayerSensitivity>> AggregateProfile(std::span<const TrialKl> results) {
  if (results.empty()) return absl::InvalidArgumentError("aggregate: no trial results");
  for (const TrialKl& r : results) {
    if (r.sample < 0 || r.layer < 0 || r.trial < 0) {
      return absl::InvalidArgumentError(absl::StrCat("aggregate: negative index in ", Key(r)));
    }
    if (Status valid = CheckTrialKl(r.kl); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate: at ", Key(r), ": ", valid.message()));
    }
  }
  std::vector<TrialKl> sorted(results.begin(), results.end());
  std::sort(sorted.begin(), sorted.end(), CanonicalLess);
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (!CanonicalLess(sorted[i - 1], sorted[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate: duplicate result for ", Key(sorted[i])));
    }
  }

  // Sums per (layer, sample), visited in canonical order: samples ascending, and within one
  // (sample, layer) trials ascending, so each sum has one fixed order of additions.
  struct Cell {
    double sum = 0.0;
    int64_t trials = 0;
  };
  std::map<int64_t, std::map<int64_t, Cell>> cells;  // layer -> sample -> cell
  std::map<int64_t, double> layer_totals;            // layer -> sum of all its values
  for (const TrialKl& r : sorted) {
    Cell& c = cells[r.layer][r.sample];
    c.sum += r.kl;
    ++c.trials;
    layer_totals[r.layer] += r.kl;
  }

  const auto& [first_layer, first_samples] = *cells.begin();
  const int64_t trials = first_samples.begin()->second.trials;
  std::vector<LayerSensitivity> out;
  out.reserve(cells.size());
  for (const auto& [layer, samples] : cells) {
    if (samples.size() != first_samples.size() ||
        !std::equal(samples.begin(), samples.end(), first_samples.begin(),
                    [](const auto& a, const auto& b) { return a.first == b.first; })) {
      return absl::InvalidArgumentError(absl::StrCat("aggregate: incomplete results: layer ", layer,
                                                     " has ", samples.size(), " samples, layer ",
                                                     first_layer, " has ", first_samples.size(),
                                                     " (or different sample ids)"));
    }
    LayerSensitivity l;
    l.layer = layer;
    for (const auto& [sample, cell] : samples) {
      if (cell.trials != trials) {
        return absl::InvalidArgumentError(absl::StrCat("aggregate: incomplete results: (sample ",
                                                       sample, ", layer ", layer, ") has ",
                                                       cell.trials, " trials, expected ", trials));
      }
      l.per_sample_mean.push_back(cell.sum / static_cast<double>(cell.trials));
    }
    l.count = static_cast<int64_t>(samples.size()) * trials;
    l.mean_kl = layer_totals[layer] / static_cast<double>(l.count);
    double mean_of_means = 0.0;
    for (double m : l.per_sample_mean) mean_of_means += m;
    mean_of_means /= static_cast<double>(l.per_sample_mean.size());
    l.std_error = StandardError(l.per_sample_mean, mean_of_means);
    out.push_back(std::move(l));
  }
  return out;
}

StatusOr<SensitivityProfile> AssembleProfile(const ProfileModel& model, ProfileParams params,
                                             std::span<const TrialKl> results,
                                             std::string created_at) {
  ASSIGN_OR_RETURN(std::vector<LayerSensitivity> layers, AggregateProfile(results));
  if (params.objective == Objective::kResponse) {
    // Trial t measured budget params.budgets[t] (per head: head t / G at budget t % G).
    const int64_t trials =
        layers.front().count / static_cast<int64_t>(layers.front().per_sample_mean.size());
    if (trials != ResponseTrialCount(params)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregate: a response profile has one trial per budget",
          params.kv_heads > 0 ? " and KV head" : "", ": params.budgets has ", params.budgets.size(),
          " budgets", params.kv_heads > 0 ? " x " : "",
          params.kv_heads > 0 ? absl::StrCat(params.kv_heads, " KV heads") : std::string(),
          ", the results ", trials, " trials per (sample, layer)"));
    }
    ASSIGN_OR_RETURN(LayerResponses points,
                     ResponsePoints(results, params.budgets, params.kv_heads));
    for (LayerSensitivity& l : layers) {
      l.response = std::move(points[l.layer].layer);
      l.head_response = std::move(points[l.layer].heads);
    }
  }
  SensitivityProfile profile;
  profile.model = model;
  profile.params = std::move(params);
  profile.params.layers.clear();
  for (const LayerSensitivity& l : layers) profile.params.layers.push_back(l.layer);
  profile.layers = std::move(layers);
  profile.created_at = std::move(created_at);
  profile.tool_version = std::string(ToolVersion());
  RETURN_IF_ERROR(ValidateProfile(profile));
  if (profile.params.samples >= 2) {
    ASSIGN_OR_RETURN(profile.stability, ComputeStability(profile));
  }
  return profile;
}

}  // namespace ripplekv::method
