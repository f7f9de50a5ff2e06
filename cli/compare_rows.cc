#include "cli/compare_rows.h"

#include "base/strings.h"

namespace ripplekv::cli {

std::string BudgetLabel(int budget) { return budget == 0 ? "full" : Cat(budget); }

std::string Row::Label() const {
  if (!budget) return task;
  if (task.empty()) return Cat("budget ", BudgetLabel(*budget));
  return Cat(task, " at budget ", BudgetLabel(*budget));
}

std::string_view Row::Direction() const {
  return any_lower && any_higher ? "mixed" : (any_lower ? "lower" : "higher");
}

double Row::FavourA() const {
  if (binary) return static_cast<double>(wins - losses);
  return wilcoxon ? wilcoxon->w_plus - wilcoxon->w_minus : 0.0;
}

PairCounts AddPairs(Row& row, const ExampleScores& a, const ExampleScores& b,
                    bool lower_is_better) {
  PairCounts counts;
  for (const auto& [example, x] : a) {
    const auto y = b.find(example);
    if (y == b.end()) continue;
    row.score_a.push_back(x);
    row.score_b.push_back(y->second);
    row.diff.push_back(lower_is_better ? y->second - x : x - y->second);
    ++counts.paired;
  }
  (lower_is_better ? row.any_lower : row.any_higher) = true;
  counts.only_a = static_cast<int64_t>(a.size()) - counts.paired;
  counts.only_b = static_cast<int64_t>(b.size()) - counts.paired;
  return counts;
}

Status ComputeRow(Row& row, const RowStatsOptions& options) {
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
  ASSIGN_OR_RETURN(row.interval,
                   method::PairedBootstrapInterval(row.diff, {.resamples = options.resamples,
                                                              .seed = options.seed,
                                                              .alpha = options.alpha}));
  row.d_z = method::CohenDz(row.diff);
  row.rank_biserial = method::RankBiserial(*row.wilcoxon);
  return absl::OkStatus();
}

}  // namespace ripplekv::cli
