// ripplekv compare RECORDS.jsonl (--a M1 --b M2 | --pair M1,M2 [--pair M3,M4 ...])
//   [--by task,budget] [--json] [--seed N] [--resamples N] [--alpha A]
// ripplekv compare RECORDS.jsonl --verdict [--json] [--seed N] [--resamples N] [--alpha A]
//
// Paired comparison of methods from `ripplekv eval --records-out` records (docs/EVAL.md,
// "Comparing methods"): per comparison (a, b) and row (task x budget by default) the two
// methods' scores are paired by example; binary rows get the exact sign test (McNemar), continuous
// rows the Wilcoxon signed-rank test, a seeded bootstrap interval of the mean difference and
// effect sizes; the p-values of every printed row, over every comparison, are Holm-adjusted
// together and the verdict is taken at --alpha after that. The rows are cli/compare_rows.h, the
// statistics method/paired_stats.h.
// --verdict (docs/EVAL.md, "The verdict table"; cli/compare_verdict.h) chooses the comparisons
// itself: every ripple+S in the records against each baseline with selection S that the records
// hold (uniform, pyramid, cake, the permuted and spike controls averaged per example over their
// maps, the reversed control), per task and compressed budget, one Holm family over every cell;
// each cell says beats / loses / n.s. with p (Holm) and the mean and relative difference, and for
// the permuted maps RippleKV's rank among them. It takes no --a, --b, --pair or --by.
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
#include "cli/compare_rows.h"
#include "cli/compare_verdict.h"
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
  bool verdict = false;       // the verdict table (cli/compare_verdict.h) instead of comparisons
  bool by_given = false;      // --by was on the command line
};

// One comparison: d = score of a - score of b, oriented so that d > 0 favours a.
struct Comparison {
  std::string a;
  std::string b;
};

RowStatsOptions StatsOptions(const CompareArgs& args) {
  return {.resamples = args.resamples, .seed = args.seed, .alpha = args.alpha};
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
    const PairCounts counts =
        AddPairs(rows[slot->second], a->second, b->second, eval::LowerIsBetter(cell.first));
    if (counts.only_a > 0 || counts.only_b > 0) {
      spdlog::warn("{}: {} examples only in {}, {} only in {}; {} paired", label, counts.only_a,
                   pair.a, counts.only_b, pair.b, counts.paired);
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

// --verdict: every ripple+S against its baselines, one Holm family over the whole table.
int RunVerdict(const CompareArgs& args) {
  if (!args.a.empty() || !args.b.empty() || !args.pairs.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "--verdict chooses its comparisons itself (ripple+S against each baseline); it takes no "
        "--a, --b or --pair"));
  }
  if (args.by_given) {
    return ReportError(
        absl::InvalidArgumentError("--verdict has a row per task and budget; drop --by"));
  }
  auto records = eval::ReadRecordsFile(args.records);
  if (!records.ok()) return ReportError(records.status());
  auto cells = BuildVerdict(*records, args.records, StatsOptions(args));
  if (!cells.ok()) return ReportError(cells.status());
  if (args.json) {
    std::printf("%s\n", VerdictJson(*cells, StatsOptions(args))
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    std::fputs(VerdictMarkdown(*cells, StatsOptions(args)).c_str(), stdout);
  }
  return kExitOk;
}

int RunCompare(const CompareArgs& args) {
  if (!(args.alpha > 0.0 && args.alpha < 1.0)) {
    return ReportError(
        absl::InvalidArgumentError(Cat("--alpha must be in (0, 1), got ", args.alpha)));
  }
  if (args.verdict) return RunVerdict(args);
  auto pairs = Comparisons(args);
  if (!pairs.ok()) return ReportError(pairs.status());
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
    if (Status st = ComputeRow(row, StatsOptions(args)); !st.ok()) return ReportError(st);
    p_values.push_back(row.p_value);
  }
  auto adjusted = method::HolmAdjust(p_values);
  if (!adjusted.ok()) return ReportError(adjusted.status());
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows[i];
    row.p_holm = (*adjusted)[i];
    const double favour_a = row.FavourA();
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
  cmd->add_flag("--verdict", a->verdict,
                "Instead of --a/--b/--pair: every ripple+S against each baseline in the records "
                "(uniform, pyramid, cake, permuted, reversed and spike maps with selection S), "
                "per task and budget, Holm-corrected as one family");
  cmd->add_flag("--json", a->json, "Print the rows as JSON");
  cmd->add_option("--seed", a->seed, "Seed of the bootstrap resampling")->capture_default_str();
  cmd->add_option("--resamples", a->resamples, "Bootstrap resamples per row")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  cmd->add_option("--alpha", a->alpha,
                  "Family-wise error rate after Holm's correction; intervals at 1 - alpha")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([a, cmd, &run] {
    if (a->by == "budget,task") a->by = "task,budget";
    a->by_given = cmd->count("--by") > 0;
    run = [a] { return RunCompare(*a); };
  });
}

}  // namespace ripplekv::cli
