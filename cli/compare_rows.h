#pragma once
// The rows of `ripplekv compare` (docs/EVAL.md, "Comparing methods"): two methods' scores paired
// by example, and the test, interval and effect sizes computed on them (method/paired_stats.h).
// The pairwise table and the verdict table (cli/compare_verdict.h) both compute their rows here.
// Thread-safety: pure functions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/paired_stats.h"

namespace ripplekv::cli {

// "full" for the uncompressed cache (budget 0), else the number.
std::string BudgetLabel(int budget);

// How a row's statistics are computed.
struct RowStatsOptions {
  int64_t resamples = 10000;  // bootstrap replicates per row
  uint64_t seed = 0;          // bootstrap: every row starts from this seed
  double alpha = 0.05;        // the bootstrap interval's level is 1 - alpha
};

// One row: the pairs of a group and what is computed from them.
struct Row {
  std::string a;  // the comparison's methods
  std::string b;
  std::string task;           // empty when pooled over tasks
  std::optional<int> budget;  // none when pooled over budgets
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
  std::string Label() const;
  // "higher", "lower" or "mixed": which way the row's tasks count as better.
  std::string_view Direction() const;
  // The direction of the test that ran (after ComputeRow): wins - losses on binary rows, W+ - W-
  // on continuous ones. > 0 favours a, < 0 favours b.
  double FavourA() const;
};

// Examples of one (task, budget): example id -> score.
using ExampleScores = std::map<std::string, double>;

struct PairCounts {
  int64_t paired = 0;  // examples both maps have, appended to the row
  int64_t only_a = 0;  // examples only `a` has, left out
  int64_t only_b = 0;  // examples only `b` has, left out
};

// Appends to `row` every example both `a` and `b` score, in example order: the raw scores and
// d = a - b, or b - a when `lower_is_better`, so that d > 0 favours a; marks the row's direction.
PairCounts AddPairs(Row& row, const ExampleScores& a, const ExampleScores& b, bool lower_is_better);

// Fills the statistics of a row with at least one pair: binary (every score 0 or 1) rows get the
// exact sign test, continuous rows the Wilcoxon signed-rank test, the bootstrap interval of the
// mean difference, d_z and the rank-biserial correlation. p_holm and verdict are the caller's.
// Errors: those of method/paired_stats.h (a difference that is not finite).
[[nodiscard]] Status ComputeRow(Row& row, const RowStatsOptions& options);

}  // namespace ripplekv::cli
