// ripplekv compare RECORDS.jsonl (--a M1 --b M2 | --pair M1,M2 [--pair M3,M4 ...])
//   [--by task,budget] [--json] [--seed N] [--resamples N] [--alpha A]
//
// Paired comparison of methods from `ripplekv eval --records-out` records (docs/EVAL.md,
// "Comparing two methods"): per comparison (a, b) and row (task x budget by default) the two
// methods' scores are paired by example; binary rows get the exact sign test (McNemar), continuous
// rows the Wilcoxon signed-rank test, a seeded bootstrap interval of the mean difference and
// effect sizes; the p-values of every printed row, over every comparison, are Holm-adjusted
// together and the verdict is taken at --alpha after that. The statistics are
// method/paired_stats.h.
// stdout: a Markdown table (or --json); stderr: warnings about examples without a partner.
// Exit codes: 0, 2 for bad usage or a malformed records file (one line naming file:line and the
// field), 1 when the file cannot be read for another reason.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "eval/fidelity_task.h"
#include "eval/records.h"
#include "method/paired_stats.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {
namespace {

struct CompareArgs {
  std::string records;
  std::string a;                   // method whose scores are x in d = x - y
  std::string b;                   // the other method
  std::vector<std::string> pairs;  // instead of --a/--b: "A,B" per comparison
  std::string by = "task,budget";
  bool json = false;
  uint64_t seed = 0;          // bootstrap: every row starts from this seed
  int64_t resamples = 10000;  // bootstrap replicates per row
  double alpha = 0.05;        // family-wise error rate over the printed rows; CI level 1 - alpha
};

std::string BudgetLabel(int budget) { return budget == 0 ? "full" : Cat(budget); }

// One comparison: d = score of a - score of b, oriented so that d > 0 favours a.
struct Comparison {
  std::string a;
  std::string b;
};

// One printed row: the pairs of a group and what is computed from them.
struct Row {
  std::string a;  // the comparison's methods
  std::string b;
  std::string task;           // empty when --by budget
  std::optional<int> budget;  // none when --by task
  // Per pair: the raw scores and the oriented difference (positive favours a).
  std::vector<double> score_a;
  std::vector<double> score_b;
  std::vector<double> diff;
  bool any_lower = false;   // some pair's task is lower-is-better
  bool any_higher = false;  // some pair's task is higher-is-better

  bool binary = false;
  int64_t wins = 0, ties = 0, losses = 0;
  double p_value = 1.0;
  double p_holm = 1.0;
  std::optional<method::WilcoxonResult> wilcoxon;  // continuous rows
  std::optional<method::Interval> interval;        // continuous rows
  double d_z = 0.0;
  double rank_biserial = 0.0;
  std::string verdict;

  // "passkey at budget 64", "passkey" or "budget 64", as the row's grouping has it.
  std::string Label() const {
    if (!budget) return task;
    if (task.empty()) return Cat("budget ", BudgetLabel(*budget));
    return Cat(task, " at budget ", BudgetLabel(*budget));
  }

  std::string_view Direction() const {
    return any_lower && any_higher ? "mixed" : (any_lower ? "lower" : "higher");
  }
};

Status ComputeRow(Row& row, const CompareArgs& args) {
  row.binary = true;
  for (size_t i = 0; i < row.diff.size(); ++i) {
    for (double s : {row.score_a[i], row.score_b[i]}) {
      if (s != 0.0 && s != 1.0) row.binary = false;
    }
    if (row.diff[i] > 0) {
      ++row.wins;
    } else if (row.diff[i] < 0) {
      ++row.losses;
    } else {
      ++row.ties;
    }
  }
  if (row.binary) {
    row.p_value = method::SignTestPValue(row.wins, row.losses);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(row.wilcoxon, method::WilcoxonSignedRank(row.diff));
  row.p_value = row.wilcoxon->p_value;
  ASSIGN_OR_RETURN(
      row.interval,
      method::PairedBootstrapInterval(
          row.diff, {.resamples = args.resamples, .seed = args.seed, .alpha = args.alpha}));
  row.d_z = method::CohenDz(row.diff);
  row.rank_biserial = method::RankBiserial(*row.wilcoxon);
  return absl::OkStatus();
}

// Pairs the two methods' scores by example within each (task, budget) and collects the pairs into
// the rows --by asks for, in order: tasks as they first appear in the file, budgets ascending.
StatusOr<std::vector<Row>> BuildRows(const std::vector<eval::ScoreRecord>& records,
                                     const CompareArgs& args, const Comparison& pair, bool by_task,
                                     bool by_budget) {
  std::vector<std::string> task_order;
  std::set<std::string> methods;
  // (task, budget) -> example -> score, per method.
  std::map<std::pair<std::string, int>, std::map<std::string, double>> of_a, of_b;
  for (const eval::ScoreRecord& r : records) {
    methods.insert(r.method);
    if (r.method != pair.a && r.method != pair.b) continue;
    if (std::find(task_order.begin(), task_order.end(), r.task) == task_order.end()) {
      task_order.push_back(r.task);
    }
    (r.method == pair.a ? of_a : of_b)[{r.task, r.budget}][r.example_id] = r.score;
  }
  for (const std::string& m : {pair.a, pair.b}) {
    if (!methods.contains(m)) {
      std::string known;
      for (const std::string& k : methods) known += (known.empty() ? "" : ", ") + k;
      return absl::InvalidArgumentError(
          Cat(args.records, ": no records of method ", m, " (methods in the file: ", known, ")"));
    }
  }
  auto task_rank = [&](const std::string& task) {
    return std::find(task_order.begin(), task_order.end(), task) - task_order.begin();
  };
  std::vector<std::pair<std::string, int>> cells;
  for (const auto& [cell, scores] : of_a) cells.push_back(cell);
  for (const auto& [cell, scores] : of_b) {
    if (!of_a.contains(cell)) cells.push_back(cell);
  }
  std::sort(cells.begin(), cells.end(), [&](const auto& x, const auto& y) {
    return std::make_pair(task_rank(x.first), x.second) <
           std::make_pair(task_rank(y.first), y.second);
  });

  std::vector<Row> rows;
  std::map<std::pair<std::string, int>, size_t> row_of;  // group key -> index in rows
  for (const auto& cell : cells) {
    const std::string label = Cat(cell.first, " at budget ", BudgetLabel(cell.second));
    const auto a = of_a.find(cell);
    const auto b = of_b.find(cell);
    if (a == of_a.end() || b == of_b.end()) {
      spdlog::warn("{}: only {} has scores, skipped", label, a == of_a.end() ? pair.b : pair.a);
      continue;
    }
    const std::pair<std::string, int> key{by_task ? cell.first : "", by_budget ? cell.second : 0};
    auto [slot, added] = row_of.try_emplace(key, rows.size());
    if (added) {
      Row row;
      row.a = pair.a;
      row.b = pair.b;
      row.task = key.first;
      if (by_budget) row.budget = cell.second;
      rows.push_back(std::move(row));
    }
    Row& row = rows[slot->second];
    const bool lower = eval::LowerIsBetter(cell.first);
    int64_t paired = 0;
    for (const auto& [example, x] : a->second) {
      const auto y = b->second.find(example);
      if (y == b->second.end()) continue;
      row.score_a.push_back(x);
      row.score_b.push_back(y->second);
      row.diff.push_back(lower ? y->second - x : x - y->second);
      ++paired;
    }
    (lower ? row.any_lower : row.any_higher) = true;
    const auto only_a = static_cast<int64_t>(a->second.size()) - paired;
    const auto only_b = static_cast<int64_t>(b->second.size()) - paired;
    if (only_a > 0 || only_b > 0) {
      spdlog::warn("{}: {} examples only in {}, {} only in {}; {} paired", label, only_a, pair.a,
                   only_b, pair.b, paired);
    }
  }
  std::vector<Row> kept;
  for (Row& row : rows) {
    if (row.diff.empty()) {
      spdlog::warn("{}: no example has scores of both methods, skipped", row.Label());
      continue;
    }
    kept.push_back(std::move(row));
  }
  // Cells came task-major; pooled over tasks (--by budget) the rows still go by budget.
  std::stable_sort(kept.begin(), kept.end(), [&](const Row& x, const Row& y) {
    return std::make_pair(task_rank(x.task), x.budget.value_or(0)) <
           std::make_pair(task_rank(y.task), y.budget.value_or(0));
  });
  if (kept.empty()) {
    return absl::InvalidArgumentError(Cat(args.records, ": no task and budget has scores of both ",
                                          pair.a, " and ", pair.b, " on the same examples"));
  }
  return kept;
}

std::string FormatP(double p) { return fmt::format("{:.3g}", p); }

// One comparison: the table names its methods in the header. Several: a first column names each
// row's comparison and the header says "a" and "b".
void PrintMarkdown(const std::vector<Row>& rows, const std::vector<Comparison>& pairs,
                   const CompareArgs& args, bool by_task, bool by_budget) {
  const std::string level = fmt::format("{:g}%", 100.0 * (1.0 - args.alpha));
  const bool several = pairs.size() > 1;
  const std::string a = several ? "a" : pairs[0].a;
  const std::string b = several ? "b" : pairs[0].b;
  std::string out;
  if (several) out += "| a vs b ";
  if (by_task) out += "| task ";
  if (by_budget) out += "| budget ";
  out += Cat("| n | mean ", a, " | mean ", b, " | Δ | wins/ties/losses | test | p | ",
             "p (Holm) | ", level, " CI of Δ | d_z | r | verdict |\n");
  if (several) out += "|:--";
  if (by_task) out += "|:--";
  if (by_budget) out += "|--:";
  out += "|--:|--:|--:|--:|--:|:--|--:|--:|--:|--:|--:|:--|\n";
  for (const Row& row : rows) {
    if (several) out += Cat("| ", row.a, " vs ", row.b, " ");
    if (by_task) out += Cat("| ", row.task, " ");
    if (by_budget) out += Cat("| ", BudgetLabel(*row.budget), " ");
    out += fmt::format("| {} | {:.4f} | {:.4f} | {:+.4f} | {}/{}/{} | ", row.diff.size(),
                       method::MeanDifference(row.score_a), method::MeanDifference(row.score_b),
                       method::MeanDifference(row.diff), row.wins, row.ties, row.losses);
    if (row.binary) {
      out += Cat("sign | ", FormatP(row.p_value), " | ", FormatP(row.p_holm), " | – | – | – | ");
    } else {
      out += fmt::format("Wilcoxon {} | {} | {} | [{:+.4f}, {:+.4f}] | {:+.2f} | {:+.2f} | ",
                         row.wilcoxon->exact ? "exact" : "normal", FormatP(row.p_value),
                         FormatP(row.p_holm), row.interval->low, row.interval->high, row.d_z,
                         row.rank_biserial);
    }
    out += Cat(row.verdict, " |\n");
  }
  out += Cat("\nΔ: mean per-pair difference ", a, " − ", b,
             ", sign flipped where lower is better (fidelity/kl, fidelity/delta_nll), so Δ > 0 "
             "favours ",
             a, ". p (Holm): adjusted over the ", rows.size(), " rows",
             several ? Cat(" of ", pairs.size(), " comparisons") : std::string(),
             "; verdict at alpha = ", fmt::format("{:g}", args.alpha), ".\n");
  std::fputs(out.c_str(), stdout);
}

void PrintJson(const std::vector<Row>& rows, const std::vector<Comparison>& pairs,
               const CompareArgs& args) {
  nlohmann::ordered_json j;
  if (pairs.size() == 1) {
    j["a"] = pairs[0].a;
    j["b"] = pairs[0].b;
  }
  j["comparisons"] = nlohmann::ordered_json::array();
  for (const Comparison& pair : pairs) {
    j["comparisons"].push_back({{"a", pair.a}, {"b", pair.b}});
  }
  j["by"] = args.by;
  j["alpha"] = args.alpha;
  j["resamples"] = args.resamples;
  j["seed"] = args.seed;
  j["rows"] = nlohmann::ordered_json::array();
  for (const Row& row : rows) {
    nlohmann::ordered_json r;
    r["a"] = row.a;
    r["b"] = row.b;
    if (!row.task.empty()) r["task"] = row.task;
    if (row.budget) r["budget"] = *row.budget;
    r["direction"] = row.Direction();
    r["kind"] = row.binary ? "binary" : "continuous";
    r["n"] = row.diff.size();
    r["mean_a"] = method::MeanDifference(row.score_a);
    r["mean_b"] = method::MeanDifference(row.score_b);
    r["diff"] = method::MeanDifference(row.diff);
    r["wins"] = row.wins;
    r["ties"] = row.ties;
    r["losses"] = row.losses;
    r["test"] = row.binary ? "sign" : "wilcoxon";
    r["exact"] = row.binary || row.wilcoxon->exact;
    r["p_value"] = row.p_value;
    r["p_holm"] = row.p_holm;
    if (row.binary) {
      for (const char* key : {"ci_low", "ci_high", "w_plus", "w_minus", "d_z", "rank_biserial"}) {
        r[key] = nullptr;
      }
    } else {
      r["ci_low"] = row.interval->low;
      r["ci_high"] = row.interval->high;
      r["w_plus"] = row.wilcoxon->w_plus;
      r["w_minus"] = row.wilcoxon->w_minus;
      r["d_z"] = row.d_z;
      r["rank_biserial"] = row.rank_biserial;
    }
    r["verdict"] = row.verdict;
    j["rows"].push_back(std::move(r));
  }
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// The comparisons asked for: --a/--b, or every --pair A,B. InvalidArgument for both or neither, a
// pair that is not two names, a method compared with itself or a comparison asked twice.
StatusOr<std::vector<Comparison>> Comparisons(const CompareArgs& args) {
  const bool single = !args.a.empty() || !args.b.empty();
  if (single == !args.pairs.empty()) {
    return absl::InvalidArgumentError("give either --a M1 --b M2 or one --pair M1,M2 or more");
  }
  std::vector<Comparison> pairs;
  if (single) {
    if (args.a.empty() || args.b.empty()) {
      return absl::InvalidArgumentError("--a and --b go together");
    }
    pairs.push_back({args.a, args.b});
  }
  for (const std::string& text : args.pairs) {
    const size_t comma = text.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == text.size() ||
        text.find(',', comma + 1) != std::string::npos) {
      return absl::InvalidArgumentError(Cat("--pair '", text, "' is not M1,M2"));
    }
    pairs.push_back({text.substr(0, comma), text.substr(comma + 1)});
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].a == pairs[i].b) {
      return absl::InvalidArgumentError(
          Cat(single ? "--a and --b name" : Cat("--pair ", pairs[i].a, ",", pairs[i].b, " names"),
              " the same method"));
    }
    for (size_t k = 0; k < i; ++k) {
      if (pairs[k].a == pairs[i].a && pairs[k].b == pairs[i].b) {
        return absl::InvalidArgumentError(
            Cat("--pair ", pairs[i].a, ",", pairs[i].b, " is given twice"));
      }
    }
  }
  return pairs;
}

int RunCompare(const CompareArgs& args) {
  auto pairs = Comparisons(args);
  if (!pairs.ok()) return ReportError(pairs.status());
  if (!(args.alpha > 0.0 && args.alpha < 1.0)) {
    return ReportError(
        absl::InvalidArgumentError(Cat("--alpha must be in (0, 1), got ", args.alpha)));
  }
  const bool by_task = args.by != "budget";
  const bool by_budget = args.by != "task";
  auto records = eval::ReadRecordsFile(args.records);
  if (!records.ok()) return ReportError(records.status());
  std::vector<Row> rows;  // every pair's, in the order the pairs were given
  for (const Comparison& pair : *pairs) {
    auto built = BuildRows(*records, args, pair, by_task, by_budget);
    if (!built.ok()) return ReportError(built.status());
    for (Row& row : *built) rows.push_back(std::move(row));
  }
  std::vector<double> p_values;
  for (Row& row : rows) {
    if (Status st = ComputeRow(row, args); !st.ok()) return ReportError(st);
    p_values.push_back(row.p_value);
  }
  auto adjusted = method::HolmAdjust(p_values);
  if (!adjusted.ok()) return ReportError(adjusted.status());
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows[i];
    row.p_holm = (*adjusted)[i];
    // The direction of the test that was run: the sign counts, or the rank sums.
    const double favour_a = row.binary ? static_cast<double>(row.wins - row.losses)
                                       : row.wilcoxon->w_plus - row.wilcoxon->w_minus;
    row.verdict = row.p_holm >= args.alpha ? "no difference"
                  : favour_a > 0           ? "a better"
                  : favour_a < 0           ? "b better"
                                           : "no difference";
  }
  if (args.json) {
    PrintJson(rows, *pairs, args);
  } else {
    PrintMarkdown(rows, *pairs, args, by_task, by_budget);
  }
  return kExitOk;
}

}  // namespace

void AddCompareCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Paired comparison of two methods from `eval --records-out` records");
  cmd->add_option("records", a->records, "JSONL written by `ripplekv eval --records-out`")
      ->required();
  cmd->add_option("--a", a->a, "First method (d = a - b)");
  cmd->add_option("--b", a->b, "Second method");
  cmd->add_option("--pair", a->pairs,
                  "A comparison A,B (d = A - B), instead of --a/--b; repeat it to compare several "
                  "pairs with Holm's correction over all their rows")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--by", a->by, "Rows: task, budget or task,budget")
      ->capture_default_str()
      ->transform(CLI::IsMember({"task", "budget", "task,budget", "budget,task"}));
  cmd->add_flag("--json", a->json, "Print the rows as JSON");
  cmd->add_option("--seed", a->seed, "Seed of the bootstrap resampling")->capture_default_str();
  cmd->add_option("--resamples", a->resamples, "Bootstrap resamples per row")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  cmd->add_option("--alpha", a->alpha,
                  "Family-wise error rate after Holm's correction; intervals at 1 - alpha")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([a, &run] {
    if (a->by == "budget,task") a->by = "task,budget";
    run = [a] { return RunCompare(*a); };
  });
}

}  // namespace ripplekv::cli
