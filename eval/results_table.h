#pragma once
// The results table of `ripplekv eval`: per method × budget × task, the mean score with its 95%
// confidence interval and n; per method × budget, the average across tasks (as the paper's
// tables report it). Rendered as markdown (default), JSON or CSV (RFC 4180). docs/EVAL.md shows
// each format.
//
// Order of rows: methods in order of first appearance in the input, budgets ascending (the full
// cache, budget 0, first), tasks in order of first appearance. The same records in the same
// order give byte-identical output.
//
// The average across tasks of one method × budget is the unweighted mean of its task means. Its
// interval treats the task means as independent: SE = sqrt(sum_k SE_k^2) / K with
// SE_k = stddev_k / sqrt(n_k), half-width = t(0.975, df) * SE with Welch–Satterthwaite
// df = (sum_k SE_k^2)^2 / sum_k (SE_k^4 / (n_k - 1)); 0 when every SE_k is 0, NaN when any task
// has n < 2. A method × budget that lacks one of the averaged tasks (present for some other
// method × budget) gets no average (NaN), so averages are only compared over the same tasks.
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/records.h"
#include "eval/stats.h"

namespace ripplekv::eval {

// Reserved task name of average rows in CSV.
inline constexpr std::string_view kAverageTask = "average";

struct TableOptions {
  // Tasks whose name starts with this prefix are shown but left out of the average across tasks
  // (fidelity rows are divergences, not accuracies). Empty: average every task.
  std::string average_exclude_prefix = "fidelity";
  int decimals = 4;  // digits after the point in markdown, 0..17 (JSON and CSV: full precision)
};

struct TaskResult {
  std::string method;
  int budget = 0;
  std::string task;
  MeanCi stats;  // over the task's examples
};

struct AverageResult {
  std::string method;
  int budget = 0;
  int tasks = 0;             // tasks averaged (those present and not excluded)
  int64_t n = 0;             // examples over those tasks
  double mean = kNaN;        // NaN when a task is missing (see the top of this file)
  double half_width = kNaN;  // 95% interval half-width; NaN when not defined
};

struct ResultTable {
  std::vector<TaskResult> results;  // in table order
  // One per method × budget, in table order; none at all when no task is averaged.
  std::vector<AverageResult> averages;
  TableOptions options;
};

// Groups and summarises `records`. Errors (InvalidArgument naming the record's index and field):
// an empty method, task or example_id, task "average", a negative budget, a non-finite score, the
// same (method, budget, task, example_id) twice.
[[nodiscard]] StatusOr<ResultTable> BuildResultTable(std::span<const ScoreRecord> records,
                                                     const TableOptions& options = {});

enum class TableFormat { kMarkdown, kJson, kCsv };

// Markdown: one pipe table as in the paper's tables: a row per method × budget, a column per task
// ("task (n=N)", N the examples of the task's first cell; a cell with another n says so) and,
// when there are averages, an "average" column. A cell reads "0.5000 ±0.1234" (mean and 95% CI
// half-width), just the mean when the interval is undefined, "n/a" for an undefined average and
// "–" for a task the row lacks. "|" in names is escaped, line breaks become spaces.
std::string RenderMarkdown(const ResultTable& table);
// JSON object {"results": [...], "averages": [...]}, 2-space indented, ending with a newline.
// Each result: method, budget, task, n, mean, ci95 (half-width), ci95_low, ci95_high; each
// average: method, budget, tasks, n, mean, ci95, ci95_low, ci95_high. NaN is null.
std::string RenderJson(const ResultTable& table);
// CSV (RFC 4180: CRLF line ends, fields with , " CR or LF quoted, quotes doubled), header
// method,budget,task,n,mean,ci95,ci95_low,ci95_high; average rows follow the task rows with task
// "average". NaN is an empty field.
std::string RenderCsv(const ResultTable& table);
std::string RenderTable(const ResultTable& table, TableFormat format);

}  // namespace ripplekv::eval
