#include "method/calibration_params.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/strings.h"

namespace ripplekv::method {
namespace {

Status Bad(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("params.", Sv(field), ": ", Sv(why)));
}

Status AtLeast(int64_t value, int64_t min, std::string_view field) {
  if (value >= min) return absl::OkStatus();
  return Bad(field, absl::StrCat("must be >= ", min, ", got ", value));
}

// The rules of the response objective's members (after every other rule): a response calibration
// is in cache mode with a resolved grid (ResolveResponseGrid's shape) and one trial per budget; a
// noise calibration has no grid.
Status ValidateResponseRules(const CalibrationParams& p) {
  if (p.objective != Objective::kResponse) {
    if (p.kv_heads != 0) {
      return Bad("kv_heads",
                 absl::StrCat("a per-head response needs objective response, got ", p.kv_heads,
                              " with objective ", Sv(ObjectiveName(p.objective))));
    }
    if (!p.budgets.empty()) {
      return Bad("budgets",
                 absl::StrCat("only with objective response, got ", p.budgets.size(),
                              " budgets with objective ", Sv(ObjectiveName(p.objective))));
    }
    return absl::OkStatus();
  }
  if (p.mode != PerturbMode::kCache) {
    return Bad("mode", absl::StrCat("a response calibration is in cache mode, got ",
                                    Sv(PerturbModeName(p.mode))));
  }
  if (p.budgets.empty()) {
    return Bad("budgets", absl::StrCat("must end with the full cache, params.context_len (",
                                       p.context_len, "), got none"));
  }
  const int64_t min_budget = MinResponseBudget(p.selector);
  for (size_t i = 0; i < p.budgets.size(); ++i) {
    const int64_t budget = p.budgets[i];
    const std::string field = absl::StrCat("budgets[", i, "]");
    if (i > 0 && budget <= p.budgets[i - 1]) {
      return Bad(field, absl::StrCat("must be > params.budgets[", i - 1, "] (", p.budgets[i - 1],
                                     "): the grid is strictly ascending, got ", budget));
    }
    if (i + 1 == p.budgets.size()) {
      if (budget != p.context_len) {
        return Bad(field,
                   absl::StrCat("the last budget must be the full cache, params.context_len (",
                                p.context_len, "), got ", budget));
      }
      break;
    }
    if (budget < min_budget) {
      return Bad(field,
                 absl::StrCat("must be >= ", min_budget, " (the smallest budget of selector ",
                              Sv(ResponseSelectorName(p.selector)), "), got ", budget));
    }
    if (budget >= p.context_len) {
      return Bad(field, absl::StrCat("must be < params.context_len (", p.context_len,
                                     ") before the last, got ", budget));
    }
  }
  if (p.kv_heads < 0 || p.kv_heads > kMaxKvHeads) {
    return Bad("kv_heads",
               absl::StrCat("must be in [0, ", kMaxKvHeads, "] (0: per layer), got ", p.kv_heads));
  }
  if (p.trials != ResponseTrialCount(p)) {
    return Bad(
        "trials",
        p.kv_heads == 0
            ? absl::StrCat("must be the number of params.budgets (", p.budgets.size(),
                           ") with objective response, got ", p.trials)
            : absl::StrCat("must be params.kv_heads x the number of params.budgets (", p.kv_heads,
                           " x ", p.budgets.size(), ") with a per-head response, got ", p.trials));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view PerturbModeName(PerturbMode mode) {
  switch (mode) {
    case PerturbMode::kCache:
      return "cache";
    case PerturbMode::kPrefill:
      return "prefill";
  }
  return "unknown";
}

StatusOr<PerturbMode> ParsePerturbMode(std::string_view name) {
  if (name == "cache") return PerturbMode::kCache;
  if (name == "prefill") return PerturbMode::kPrefill;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown perturbation mode \"", Sv(name), "\" (expected cache or prefill)"));
}

std::string_view ObjectiveName(Objective objective) {
  switch (objective) {
    case Objective::kNoise:
      return "noise";
    case Objective::kResponse:
      return "response";
  }
  return "unknown";
}

StatusOr<Objective> ParseObjective(std::string_view name) {
  if (name == "noise") return Objective::kNoise;
  if (name == "response") return Objective::kResponse;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown objective \"", Sv(name), "\" (expected noise or response)"));
}

std::string_view ResponseSelectorName(ResponseSelector selector) {
  switch (selector) {
    case ResponseSelector::kSnapKv:
      return "snapkv";
    case ResponseSelector::kH2o:
      return "h2o";
    case ResponseSelector::kStreaming:
      return "streaming";
  }
  return "unknown";
}

StatusOr<ResponseSelector> ParseResponseSelector(std::string_view name) {
  if (name == "snapkv") return ResponseSelector::kSnapKv;
  if (name == "h2o") return ResponseSelector::kH2o;
  if (name == "streaming") return ResponseSelector::kStreaming;
  return absl::InvalidArgumentError(absl::StrCat("unknown response selector \"", Sv(name),
                                                 "\" (expected snapkv, h2o or streaming)"));
}

int64_t MinResponseBudget(ResponseSelector selector) {
  switch (selector) {
    case ResponseSelector::kSnapKv:
      return kResponseWindow;
    case ResponseSelector::kStreaming:
      return kResponseSinks;
    case ResponseSelector::kH2o:
      return 1;
  }
  return 1;
}

CalibrationParams ResolveResponseGrid(CalibrationParams params) {
  if (params.objective != Objective::kResponse) return params;
  std::vector<int64_t> grid = params.budgets;
  if (grid.empty()) {
    grid.assign(std::begin(kDefaultResponseBudgets), std::end(kDefaultResponseBudgets));
  }
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  const int64_t min_budget = MinResponseBudget(params.selector);
  std::erase_if(
      grid, [&](int64_t budget) { return budget < min_budget || budget >= params.context_len; });
  // The full cache closes every grid: its KL is 0 by definition, the anchor of the curve.
  grid.push_back(params.context_len);
  params.budgets = std::move(grid);
  params.trials = ResponseTrialCount(params);
  return params;
}

int64_t ResponseTrialCount(const CalibrationParams& params) {
  return std::max<int64_t>(1, params.kv_heads) * static_cast<int64_t>(params.budgets.size());
}

Status ValidateCalibrationParams(const CalibrationParams& p, int64_t n_layers) {
  // Written so that NaN fails too. Alpha 0 measures nothing, and a profile requires alpha > 0.
  if (!std::isfinite(p.alpha) || !(p.alpha > 0)) {
    return Bad("alpha", absl::StrCat("must be finite and > 0, got ", p.alpha));
  }
  RETURN_IF_ERROR(AtLeast(p.trials, 1, "trials"));
  RETURN_IF_ERROR(AtLeast(p.samples, 1, "samples"));
  RETURN_IF_ERROR(AtLeast(p.context_len, 1, "context_len"));
  RETURN_IF_ERROR(AtLeast(p.probe_len, 1, "probe_len"));
  if (p.probe_len >= p.context_len) {
    return Bad("probe_len", absl::StrCat("must be < params.context_len (", p.context_len, "), got ",
                                         p.probe_len));
  }
  if (p.until_stable) {
    if (p.samples < 2) {
      return Bad("samples",
                 absl::StrCat("until_stable needs rounds of at least 2 samples, got ", p.samples));
    }
    if (p.max_samples < p.samples) {
      return Bad("max_samples",
                 absl::StrCat("must be >= params.samples (", p.samples, "), got ", p.max_samples));
    }
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const int64_t layer = p.layers[i];
    const std::string field = absl::StrCat("layers[", i, "]");
    if (layer < 0) return Bad(field, absl::StrCat("layer ", layer, " is negative"));
    if (n_layers > 0 && layer >= n_layers) {
      return Bad(field, absl::StrCat("layer ", layer, " is out of range: the model has ", n_layers,
                                     " layers"));
    }
    if (!seen.insert(layer).second) return Bad(field, absl::StrCat("layer ", layer, " repeated"));
  }
  return ValidateResponseRules(p);
}

int64_t NextRoundSamples(int64_t samples_per_round, int64_t max_samples, int64_t planned) {
  return std::max(planned, std::min(max_samples, planned + samples_per_round));
}

}  // namespace ripplekv::method
