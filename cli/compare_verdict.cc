#include "cli/compare_verdict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "base/strings.h"
#include "eval/compress/control_maps.h"
#include "eval/compress/method.h"
#include "eval/fidelity_task.h"
#include "method/paired_stats.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {
namespace {

constexpr std::array<std::string_view, 4> kSelections = {"snapkv", "h2o", "streaming", "cake"};

using Cell = std::pair<std::string, int>;  // (task, budget)
using CellScores = std::map<Cell, ExampleScores>;
using MethodScores = std::map<std::string, CellScores>;  // method -> its compressed cells

struct Baseline {
  std::string name;                  // column: "uniform", ..., "spike"
  std::vector<std::string> methods;  // one, or the k maps averaged per example
  bool averaged = false;             // permuted and spike: the per-example mean of the maps
};

// The baselines of selection `s` present in the records, in the order of the header. Methods are
// classified by eval::ParseMethod and eval::ParseMapControl, so every name `ripplekv eval` gives
// an allocation (shorthands included) counts, and nothing else does.
std::vector<Baseline> BaselinesOf(const MethodScores& scores, const std::string& s) {
  std::map<std::string, std::vector<std::string>> named;  // baseline -> the names present
  std::vector<std::pair<uint64_t, std::string>> permuted, spike;
  for (const auto& [name, cells] : scores) {
    const StatusOr<eval::Method> m = eval::ParseMethod(name);
    if (!m.ok() || eval::SelectionName(m->selection) != s) continue;
    switch (m->allocation) {
      case eval::AllocationKind::kUniform:
        named["uniform"].push_back(name);
        break;
      case eval::AllocationKind::kPyramid:
        named["pyramid"].push_back(name);
        break;
      case eval::AllocationKind::kCake:
        named["cake"].push_back(name);
        break;
      case eval::AllocationKind::kMap: {
        const auto control = eval::ParseMapControl(name.substr(0, name.find('+')));
        if (control->kind == eval::MapControlKind::kPermuted)
          permuted.emplace_back(control->seed, name);
        if (control->kind == eval::MapControlKind::kSpike) spike.emplace_back(control->seed, name);
        if (control->kind == eval::MapControlKind::kReversed) named["reversed"].push_back(name);
        break;
      }
      case eval::AllocationKind::kFull:
        break;
    }
  }
  const std::string a = Cat("ripple+", s);
  std::vector<Baseline> baselines;
  auto add_one = [&](const std::string& baseline) {
    std::vector<std::string>& names = named[baseline];
    if (names.empty()) return;
    // A shorthand ("snapkv", "pyramidkv", "cake") before its full name.
    std::stable_sort(names.begin(), names.end(), [](const std::string& x, const std::string& y) {
      return x.find('+') == std::string::npos && y.find('+') != std::string::npos;
    });
    if (names.size() > 1) {
      spdlog::warn("{} baseline of {}: both {} and {} in the records; using {}", baseline, a,
                   names[0], names[1], names[0]);
    }
    baselines.push_back({baseline, {names[0]}, false});
  };
  auto add_maps = [&](const std::string& baseline,
                      std::vector<std::pair<uint64_t, std::string>> maps) {
    if (maps.empty()) return;
    std::sort(maps.begin(), maps.end());
    std::vector<std::string> methods;
    for (auto& [k, method] : maps) methods.push_back(std::move(method));
    baselines.push_back({baseline, std::move(methods), true});
  };
  add_one("uniform");
  add_one("pyramid");
  add_one("cake");
  add_maps("permuted", std::move(permuted));
  add_one("reversed");
  add_maps("spike", std::move(spike));
  return baselines;
}

// The baseline's scores at `cell`: its method's, or the per-example mean of its maps over the
// examples every map has (a warning counts the examples left out).
ExampleScores BaselineScores(const MethodScores& scores, const Baseline& baseline, const Cell& cell,
                             const std::string& a) {
  auto cell_of = [&](const std::string& method) -> const ExampleScores* {
    const CellScores& cells = scores.at(method);
    const auto it = cells.find(cell);
    return it == cells.end() ? nullptr : &it->second;
  };
  if (!baseline.averaged) {
    const ExampleScores* only = cell_of(baseline.methods[0]);
    return only ? *only : ExampleScores{};
  }
  std::set<std::string> examples;
  std::vector<const ExampleScores*> maps;
  for (const std::string& method : baseline.methods) {
    maps.push_back(cell_of(method));
    if (maps.back()) {
      for (const auto& [example, score] : *maps.back()) examples.insert(example);
    }
  }
  ExampleScores mean;
  for (const std::string& example : examples) {
    double sum = 0.0;
    bool every = true;
    for (const ExampleScores* map : maps) {
      const auto it = map ? map->find(example) : ExampleScores::const_iterator{};
      if (!map || it == map->end()) {
        every = false;
        break;
      }
      sum += it->second;
    }
    if (every) mean[example] = sum / static_cast<double>(maps.size());
  }
  if (mean.size() < examples.size()) {
    spdlog::warn(
        "{} vs {}, {} at budget {}: {} examples lack a score of some of its {} maps, left "
        "out; {} kept",
        a, baseline.name, cell.first, BudgetLabel(cell.second), examples.size() - mean.size(),
        maps.size(), mean.size());
  }
  return mean;
}

// ripple+S's place among the permuted maps by mean score over the examples of `a_cell` that the
// baseline has: 1 + the maps strictly better.
int RankAmongMaps(const MethodScores& scores, const Baseline& baseline, const Cell& cell,
                  const ExampleScores& a_cell, const ExampleScores& b_cell) {
  const bool lower = eval::LowerIsBetter(cell.first);
  auto mean_over_pairs = [&](const ExampleScores& of) {
    double sum = 0.0;
    int64_t n = 0;
    for (const auto& [example, x] : a_cell) {
      if (!b_cell.contains(example)) continue;
      sum += of.at(example);
      ++n;
    }
    return sum / static_cast<double>(n);
  };
  const double mean_a = mean_over_pairs(a_cell);
  int rank = 1;
  for (const std::string& method : baseline.methods) {
    const double mean_map = mean_over_pairs(scores.at(method).at(cell));
    if (lower ? mean_map < mean_a : mean_map > mean_a) ++rank;
  }
  return rank;
}

}  // namespace

StatusOr<std::vector<VerdictCell>> BuildVerdict(const std::vector<eval::ScoreRecord>& records,
                                                const std::string& records_path,
                                                const RowStatsOptions& options) {
  std::vector<std::string> task_order;
  std::set<std::string> methods;
  MethodScores scores;
  for (const eval::ScoreRecord& r : records) {
    methods.insert(r.method);
    if (std::find(task_order.begin(), task_order.end(), r.task) == task_order.end()) {
      task_order.push_back(r.task);
    }
    if (r.budget == eval::kFullCacheBudget) continue;
    scores[r.method][{r.task, r.budget}][r.example_id] = r.score;
  }
  auto task_rank = [&](const std::string& task) {
    return std::find(task_order.begin(), task_order.end(), task) - task_order.begin();
  };

  std::vector<VerdictCell> cells;
  bool any_ripple = false;
  for (std::string_view selection : kSelections) {
    const std::string s(selection);
    const std::string a = Cat("ripple+", s);
    if (!scores.contains(a)) continue;
    any_ripple = true;
    const std::vector<Baseline> baselines = BaselinesOf(scores, s);
    if (baselines.empty()) {
      spdlog::warn("{}: no baseline of it in the records, left out", a);
      continue;
    }
    std::vector<Cell> a_cells;
    for (const auto& [cell, examples] : scores.at(a)) a_cells.push_back(cell);
    std::sort(a_cells.begin(), a_cells.end(), [&](const Cell& x, const Cell& y) {
      return std::make_pair(task_rank(x.first), x.second) <
             std::make_pair(task_rank(y.first), y.second);
    });
    for (const Cell& cell : a_cells) {
      const ExampleScores& a_scores = scores.at(a).at(cell);
      for (const Baseline& baseline : baselines) {
        const ExampleScores b_scores = BaselineScores(scores, baseline, cell, a);
        if (b_scores.empty()) continue;
        VerdictCell out{.selection = s, .baseline = baseline.name, .methods = baseline.methods};
        Row& row = out.row;
        row.a = a;
        row.b = baseline.name;
        row.task = cell.first;
        row.budget = cell.second;
        const PairCounts counts =
            AddPairs(row, a_scores, b_scores, eval::LowerIsBetter(cell.first));
        if (counts.only_a > 0 || counts.only_b > 0) {
          spdlog::warn("{}: {} examples only in {}, {} only in {}; {} paired", row.Label(),
                       counts.only_a, a, counts.only_b, baseline.name, counts.paired);
        }
        if (counts.paired == 0) continue;
        RETURN_IF_ERROR(ComputeRow(row, options));
        out.mean_a = method::MeanDifference(row.score_a);
        out.mean_b = method::MeanDifference(row.score_b);
        out.diff = out.mean_a - out.mean_b;
        if (out.mean_b != 0.0) out.rel_diff = 100.0 * out.diff / std::abs(out.mean_b);
        if (baseline.name == "permuted") {
          out.rank = RankAmongMaps(scores, baseline, cell, a_scores, b_scores);
          out.of = static_cast<int>(baseline.methods.size()) + 1;
        }
        cells.push_back(std::move(out));
      }
    }
  }
  if (!any_ripple) {
    std::string known;
    for (const std::string& m : methods) known += (known.empty() ? "" : ", ") + m;
    return absl::InvalidArgumentError(
        Cat(records_path,
            ": the verdict needs records of ripple+snapkv, ripple+h2o, ripple+streaming or "
            "ripple+cake at a compressed budget (methods in the file: ",
            known, ")"));
  }
  if (cells.empty()) {
    return absl::InvalidArgumentError(
        Cat(records_path,
            ": no baseline (uniform, pyramid, cake, ripple-perm<k>, ripple-rev or spike<k> with "
            "the same selection) has scores on the examples of a ripple+<selection> at a "
            "compressed budget"));
  }

  std::vector<double> p_values;
  for (const VerdictCell& cell : cells) p_values.push_back(cell.row.p_value);
  ASSIGN_OR_RETURN(std::vector<double> adjusted, method::HolmAdjust(p_values));
  for (size_t i = 0; i < cells.size(); ++i) {
    VerdictCell& cell = cells[i];
    cell.row.p_holm = adjusted[i];
    const double favour_a = cell.row.FavourA();
    cell.verdict = cell.row.p_holm >= options.alpha ? "n.s."
                   : favour_a > 0                   ? "beats"
                   : favour_a < 0                   ? "loses"
                                                    : "n.s.";
    cell.row.verdict = cell.verdict;
  }
  return cells;
}

namespace {

std::string CellText(const VerdictCell& cell) {
  std::string text =
      fmt::format("{} (p {:.2g}, {:+.3g}, ", cell.verdict, cell.row.p_holm, cell.diff);
  text += cell.rel_diff ? fmt::format("{:+.1f}%", *cell.rel_diff) : std::string("–");
  if (cell.rank) text += Cat(", rank ", *cell.rank, " of ", cell.of);
  return text + ")";
}

std::string ColumnTitle(const VerdictCell& cell) {
  if (cell.baseline == "permuted" || cell.baseline == "spike") {
    return Cat(cell.baseline, " (", cell.methods.size(), " maps)");
  }
  return Cat(cell.baseline, " (", cell.methods[0], ")");
}

}  // namespace

std::string VerdictMarkdown(const std::vector<VerdictCell>& cells, const RowStatsOptions& options) {
  std::string out = Cat(
      "Verdict: ripple+<selection> against each baseline with the same selection, per task and "
      "budget. Holm's correction over all ",
      cells.size(),
      " cells of this verdict (every selection, baseline, task and budget) as one family; alpha = ",
      fmt::format("{:g}", options.alpha), ".\n");
  for (std::string_view selection : kSelections) {
    // Columns in baseline order, rows in task and budget order, as the cells come.
    std::vector<std::string> columns;
    std::map<std::string, std::string> title;
    std::vector<Cell> rows;
    std::map<std::pair<Cell, std::string>, const VerdictCell*> at;
    for (const VerdictCell& cell : cells) {
      if (cell.selection != selection) continue;
      const Cell key{cell.row.task, *cell.row.budget};
      if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
      if (!title.contains(cell.baseline)) {
        title[cell.baseline] = ColumnTitle(cell);
        columns.push_back(cell.baseline);
      }
      at[{key, cell.baseline}] = &cell;
    }
    if (rows.empty()) continue;
    static constexpr std::array<std::string_view, 6> kOrder = {"uniform",  "pyramid",  "cake",
                                                               "permuted", "reversed", "spike"};
    std::sort(columns.begin(), columns.end(), [](const std::string& x, const std::string& y) {
      return std::find(kOrder.begin(), kOrder.end(), x) <
             std::find(kOrder.begin(), kOrder.end(), y);
    });
    out += Cat("\n### ripple+", selection, "\n\n| task | budget |");
    for (const std::string& c : columns) out += Cat(" ", title[c], " |");
    out += "\n|:--|--:|";
    for (size_t i = 0; i < columns.size(); ++i) out += ":--|";
    out += "\n";
    for (const Cell& row : rows) {
      out += Cat("| ", row.first, " | ", BudgetLabel(row.second), " |");
      for (const std::string& c : columns) {
        const auto it = at.find({row, c});
        out += Cat(" ", it == at.end() ? std::string("–") : CellText(*it->second), " |");
      }
      out += "\n";
    }
  }
  out +=
      "\nCell: beats / loses / n.s. for ripple+<selection> after Holm's correction (Wilcoxon "
      "signed-rank on continuous tasks, exact sign test on binary ones), then p (Holm), the mean "
      "difference ripple − baseline in raw scores (lower is better for fidelity/kl and "
      "fidelity/delta_nll) and that difference relative to the baseline's mean. permuted and "
      "spike: per example the mean score of their maps; rank: ripple's place among the permuted "
      "maps by mean score (1 = best).\n";
  return out;
}

nlohmann::ordered_json VerdictJson(const std::vector<VerdictCell>& cells,
                                   const RowStatsOptions& options) {
  nlohmann::ordered_json j;
  j["alpha"] = options.alpha;
  j["resamples"] = options.resamples;
  j["seed"] = options.seed;
  j["family"] = cells.size();
  j["cells"] = nlohmann::ordered_json::array();
  for (const VerdictCell& cell : cells) {
    nlohmann::ordered_json c;
    c["selection"] = cell.selection;
    c["a"] = cell.row.a;
    c["baseline"] = cell.baseline;
    c["methods"] = cell.methods;
    c["task"] = cell.row.task;
    c["budget"] = *cell.row.budget;
    c["n"] = cell.row.diff.size();
    c["mean_a"] = cell.mean_a;
    c["mean_b"] = cell.mean_b;
    c["diff"] = cell.diff;
    c["rel_diff"] = cell.rel_diff ? nlohmann::ordered_json(*cell.rel_diff) : nullptr;
    c["p"] = cell.row.p_value;
    c["p_holm"] = cell.row.p_holm;
    c["verdict"] = cell.verdict;
    c["rank"] = cell.rank ? nlohmann::ordered_json(*cell.rank) : nullptr;
    c["of"] = cell.rank ? nlohmann::ordered_json(cell.of) : nullptr;
    j["cells"].push_back(std::move(c));
  }
  return j;
}

}  // namespace ripplekv::cli
