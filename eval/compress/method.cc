#include "eval/compress/method.h"

#include <array>
#include <optional>
#include <utility>

#include "absl/strings/str_join.h"
#include "base/strings.h"
#include "eval/compress/allocation.h"
#include "eval/compress/control_maps.h"

namespace ripplekv::eval {

namespace {

struct Named {
  std::string_view name;
  AllocationKind allocation;
  SelectionKind selection;
};

constexpr std::array<Named, 6> kShorthands{{
    {"full", AllocationKind::kFull, SelectionKind::kFull},
    {"snapkv", AllocationKind::kUniform, SelectionKind::kSnapKv},
    {"pyramidkv", AllocationKind::kPyramid, SelectionKind::kSnapKv},
    {"streaming", AllocationKind::kUniform, SelectionKind::kStreaming},
    {"h2o", AllocationKind::kUniform, SelectionKind::kH2o},
    {"cake", AllocationKind::kCake, SelectionKind::kCake},
}};

constexpr std::array<std::pair<std::string_view, AllocationKind>, 6> kAllocations{{
    {"uniform", AllocationKind::kUniform},
    {"pyramid", AllocationKind::kPyramid},
    {"cake", AllocationKind::kCake},
    {"ripple", AllocationKind::kMap},
    {"map", AllocationKind::kMap},
    {"resp", AllocationKind::kMap},
}};

constexpr std::array<SelectionKind, 4> kSelections{
    SelectionKind::kSnapKv, SelectionKind::kStreaming, SelectionKind::kH2o, SelectionKind::kCake};

// The prompt length shared by every layer's statistics.
StatusOr<int> PromptLength(std::span<const LayerStats> layers) {
  if (layers.empty()) return absl::InvalidArgumentError("no layer statistics");
  for (size_t l = 1; l < layers.size(); ++l) {
    if (layers[l].length != layers[0].length) {
      return absl::InvalidArgumentError(Cat("layer ", l, " holds ", layers[l].length,
                                            " tokens, layer 0 holds ", layers[0].length));
    }
  }
  return layers[0].length;
}

Status ValidateOptions(const CompressOptions& o) {
  if (o.window < 1) return absl::InvalidArgumentError(Cat("window must be >= 1, got ", o.window));
  return ValidateSelectionOptions(o.selection);
}

}  // namespace

std::string_view AllocationName(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kUniform:
      return "uniform";
    case AllocationKind::kPyramid:
      return "pyramid";
    case AllocationKind::kCake:
      return "cake";
    case AllocationKind::kMap:
      return "map";
    case AllocationKind::kFull:
      return "full";
  }
  return "?";
}

bool Method::from_response_profile() const { return name.starts_with("resp+"); }

bool Method::needs_window_stats() const {
  return selection == SelectionKind::kSnapKv || selection == SelectionKind::kCake ||
         allocation == AllocationKind::kCake;
}

bool Method::needs_accumulated() const { return selection == SelectionKind::kH2o; }

std::vector<std::string> KnownMethods() {
  std::vector<std::string> names;
  for (const Named& s : kShorthands) names.emplace_back(s.name);
  for (const auto& [alloc, kind] : kAllocations) {
    for (SelectionKind sel : kSelections) names.push_back(Cat(alloc, "+", SelectionName(sel)));
  }
  return names;
}

StatusOr<Method> ParseMethod(std::string_view name) {
  for (const Named& s : kShorthands) {
    if (name == s.name) return Method{std::string(name), s.allocation, s.selection};
  }
  const size_t plus = name.find('+');
  if (plus != std::string_view::npos) {
    const std::string_view alloc = name.substr(0, plus), sel = name.substr(plus + 1);
    std::optional<AllocationKind> alloc_kind;
    for (const auto& [alloc_name, kind] : kAllocations) {
      if (alloc == alloc_name) alloc_kind = kind;
    }
    if (!alloc_kind && ParseMapControl(alloc)) alloc_kind = AllocationKind::kMap;
    for (SelectionKind kind : kSelections) {
      if (alloc_kind && sel == SelectionName(kind)) {
        return Method{std::string(name), *alloc_kind, kind};
      }
    }
  }
  return absl::InvalidArgumentError(
      Cat("unknown compression method \"", name, "\"; known: ", absl::StrJoin(KnownMethods(), ", "),
          ", and the controls ripple-perm<k>+S, ripple-rev+S, spike<k>+S (k >= 1)"));
}

ObserverOptions ObserverOptionsFor(const Method& method, const CompressOptions& options) {
  return {.window = options.window,
          .window_stats = method.needs_window_stats(),
          .accumulated = method.needs_accumulated()};
}

StatusOr<std::vector<int>> PlanBudgets(const Method& method, int average,
                                       std::span<const LayerStats> layers,
                                       const CompressOptions& options,
                                       std::span<const int> budget_map) {
  RETURN_IF_ERROR(ValidateOptions(options));
  ASSIGN_OR_RETURN(const int n, PromptLength(layers));
  const int n_layers = static_cast<int>(layers.size());
  const BudgetBounds bounds{
      .min_budget = MinBudget(method.selection, options.selection, options.window, n),
      .max_budget = n};
  switch (method.allocation) {
    case AllocationKind::kFull:
      return std::vector<int>(n_layers, n);
    case AllocationKind::kUniform:
      return UniformBudgets(n_layers, average, bounds);
    case AllocationKind::kPyramid:
      return PyramidBudgets(n_layers, average, options.window, options.pyramid_beta, bounds);
    case AllocationKind::kCake: {
      ASSIGN_OR_RETURN(const std::vector<double> pref,
                       CakePreferences(layers, options.cake_tau1, options.cake_tau2));
      return CakeBudgets(pref, average, options.window, bounds);
    }
    case AllocationKind::kMap:
      if (static_cast<int>(budget_map.size()) != n_layers) {
        return absl::InvalidArgumentError(Cat(method.name, " needs a budget map of ", n_layers,
                                              " layers, got ", budget_map.size()));
      }
      return MapBudgets(budget_map, average, bounds);
  }
  return absl::InvalidArgumentError("PlanBudgets: unknown allocation");
}

StatusOr<CompressReport> CompressCache(const Method& method, std::span<const int> budgets,
                                       std::span<const LayerStats> layers,
                                       const CompressOptions& options, worker::KvCache& cache) {
  RETURN_IF_ERROR(ValidateOptions(options));
  const int n_layers = cache.n_layers();
  if (static_cast<int>(budgets.size()) != n_layers || static_cast<int>(layers.size()) != n_layers) {
    return absl::InvalidArgumentError(Cat("CompressCache: ", budgets.size(), " budgets and ",
                                          layers.size(), " layer statistics for ", n_layers,
                                          " layers"));
  }
  // Select in every layer first, so that an error leaves the cache untouched.
  std::vector<std::vector<std::vector<int32_t>>> keep(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    if (layers[l].length != cache.length(l)) {
      return absl::FailedPreconditionError(Cat("CompressCache: layer ", l, " caches ",
                                               cache.length(l), " tokens but its statistics cover ",
                                               layers[l].length));
    }
    if (method.selection == SelectionKind::kFull) continue;
    auto selected = SelectTokens(method.selection, layers[l], budgets[l], options.selection);
    if (!selected.ok()) {
      return absl::Status(selected.status().code(),
                          Cat("layer ", l, ": ", std::string(selected.status().message())));
    }
    keep[l] = *std::move(selected);
  }
  CompressReport report;
  report.kept.resize(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    if (!keep[l].empty() && static_cast<int>(keep[l][0].size()) < cache.length(l)) {
      RETURN_IF_ERROR(cache.Retain(l, keep[l]));
    }
    report.kept[l] = cache.length(l);
    report.total += report.kept[l];
  }
  return report;
}

}  // namespace ripplekv::eval
