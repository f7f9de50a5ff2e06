#include "eval/results_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace ripplekv::eval {
namespace {

using Json = nlohmann::ordered_json;

Status RecordError(size_t index, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(Cat("score record ", index, ": field \"", field, "\" ", what));
}

Status Validate(std::span<const ScoreRecord> records) {
  std::set<std::tuple<std::string_view, int, std::string_view, std::string_view>> seen;
  for (size_t i = 0; i < records.size(); ++i) {
    const ScoreRecord& r = records[i];
    if (r.method.empty()) return RecordError(i, "method", "is empty");
    if (r.task.empty()) return RecordError(i, "task", "is empty");
    if (r.task == kAverageTask) {
      return RecordError(i, "task", "is \"average\", which is reserved for average rows");
    }
    if (r.example_id.empty()) return RecordError(i, "example_id", "is empty");
    if (r.budget < 0) return RecordError(i, "budget", Cat("is negative (", r.budget, ")"));
    if (!std::isfinite(r.score))
      return RecordError(i, "score", Cat("is not finite (", r.score, ")"));
    if (!seen.emplace(r.method, r.budget, r.task, r.example_id).second) {
      return RecordError(i, "example_id",
                         Cat("\"", r.example_id, "\" appears twice for method \"", r.method,
                             "\", budget ", r.budget, ", task \"", r.task, "\""));
    }
  }
  return absl::OkStatus();
}

bool Averaged(std::string_view task, const TableOptions& options) {
  return options.average_exclude_prefix.empty() ||
         !task.starts_with(options.average_exclude_prefix);
}

AverageResult Average(const std::string& method, int budget, std::span<const TaskResult> rows,
                      size_t averaged_tasks_in_table) {
  AverageResult avg{.method = method, .budget = budget};
  double mean_sum = 0.0;
  double var_sum = 0.0;   // sum of SE_k^2
  double df_denom = 0.0;  // sum of SE_k^4 / (n_k - 1)
  bool defined = true;
  for (const TaskResult& r : rows) {
    ++avg.tasks;
    avg.n += r.stats.n;
    mean_sum += r.stats.mean;
    if (r.stats.n < 2) {
      defined = false;
      continue;
    }
    const double se2 = r.stats.stddev * r.stats.stddev / static_cast<double>(r.stats.n);
    var_sum += se2;
    df_denom += se2 * se2 / static_cast<double>(r.stats.n - 1);
  }
  if (avg.tasks == 0 || static_cast<size_t>(avg.tasks) != averaged_tasks_in_table) return avg;
  const double k = static_cast<double>(avg.tasks);
  avg.mean = mean_sum / k;
  if (!defined) return avg;
  if (var_sum == 0.0) {
    avg.half_width = 0.0;
    return avg;
  }
  const double df = var_sum * var_sum / df_denom;
  avg.half_width = StudentTQuantile(0.975, df) * std::sqrt(var_sum) / k;
  return avg;
}

std::string BudgetLabel(int budget) {
  return budget == kFullCacheBudget ? std::string("full") : std::to_string(budget);
}

std::string MarkdownCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string Fixed(double value, int decimals) {
  if (std::isnan(value)) return "n/a";
  return fmt::format("{:.{}f}", value, decimals);
}

std::string Ci(double half_width, int decimals) {
  if (std::isnan(half_width)) return "n/a";
  return fmt::format("±{:.{}f}", half_width, decimals);
}

Json Number(double value) { return std::isnan(value) ? Json(nullptr) : Json(value); }

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string CsvNumber(double value) {
  return std::isnan(value) ? std::string() : fmt::format("{}", value);
}

}  // namespace

StatusOr<ResultTable> BuildResultTable(std::span<const ScoreRecord> records,
                                       const TableOptions& options) {
  RETURN_IF_ERROR(Validate(records));
  std::vector<std::string> methods;
  std::vector<std::string> tasks;
  std::map<std::string, std::set<int>> budgets;  // per method
  std::map<std::tuple<std::string, int, std::string>, std::vector<double>> scores;
  for (const ScoreRecord& r : records) {
    if (std::find(methods.begin(), methods.end(), r.method) == methods.end()) {
      methods.push_back(r.method);
    }
    if (std::find(tasks.begin(), tasks.end(), r.task) == tasks.end()) tasks.push_back(r.task);
    budgets[r.method].insert(r.budget);
    scores[{r.method, r.budget, r.task}].push_back(r.score);
  }
  size_t averaged_tasks = 0;
  for (const std::string& t : tasks) averaged_tasks += Averaged(t, options) ? 1 : 0;

  ResultTable table;
  table.options = options;
  for (const std::string& method : methods) {
    for (int budget : budgets[method]) {
      std::vector<TaskResult> averaged;
      for (const std::string& task : tasks) {
        const auto it = scores.find({method, budget, task});
        if (it == scores.end()) continue;
        TaskResult row{.method = method,
                       .budget = budget,
                       .task = task,
                       .stats = MeanWithCi(it->second, 0.95)};
        if (Averaged(task, options)) averaged.push_back(row);
        table.results.push_back(std::move(row));
      }
      if (averaged_tasks > 0) {
        table.averages.push_back(Average(method, budget, averaged, averaged_tasks));
      }
    }
  }
  return table;
}

std::string RenderMarkdown(const ResultTable& table) {
  const int d = std::clamp(table.options.decimals, 0, 17);
  // Rows: method x budget in table order; columns: tasks in order of first appearance.
  std::vector<std::pair<std::string, int>> rows;
  std::vector<std::string> tasks;
  std::map<std::tuple<std::string, int, std::string>, const TaskResult*> cells;
  std::map<std::string, int64_t> task_n;  // n of a task's first cell
  for (const TaskResult& r : table.results) {
    const std::pair<std::string, int> row{r.method, r.budget};
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    if (std::find(tasks.begin(), tasks.end(), r.task) == tasks.end()) {
      tasks.push_back(r.task);
      task_n[r.task] = r.stats.n;
    }
    cells[{r.method, r.budget, r.task}] = &r;
  }
  std::map<std::pair<std::string, int>, const AverageResult*> averages;
  for (const AverageResult& a : table.averages) averages[{a.method, a.budget}] = &a;

  auto value = [&](double mean, double half_width) {
    if (std::isnan(mean)) return std::string("n/a");
    const std::string ci = Ci(half_width, d);
    return ci == "n/a" ? Fixed(mean, d) : Fixed(mean, d) + " " + ci;
  };
  std::string out = "| method | budget |";
  std::string rule = "|:--|--:|";
  for (const std::string& t : tasks) {
    out += fmt::format(" {} (n={}) |", MarkdownCell(t), task_n[t]);
    rule += "--:|";
  }
  if (!averages.empty()) {
    out += " average |";
    rule += "--:|";
  }
  out += "\n" + rule + "\n";
  for (const auto& [method, budget] : rows) {
    out += fmt::format("| {} | {} |", MarkdownCell(method), BudgetLabel(budget));
    for (const std::string& t : tasks) {
      const auto it = cells.find({method, budget, t});
      if (it == cells.end()) {
        out += " – |";
        continue;
      }
      const MeanCi& s = it->second->stats;
      std::string cell = value(s.mean, s.half_width);
      if (s.n != task_n[t]) cell += fmt::format(" (n={})", s.n);  // differs from the header
      out += fmt::format(" {} |", cell);
    }
    if (!averages.empty()) {
      const auto it = averages.find({method, budget});
      const std::string average = it == averages.end()
                                      ? std::string("–")
                                      : value(it->second->mean, it->second->half_width);
      out += fmt::format(" {} |", average);
    }
    out += "\n";
  }
  return out;
}

std::string RenderJson(const ResultTable& table) {
  Json results = Json::array();
  for (const TaskResult& r : table.results) {
    const bool ci = !std::isnan(r.stats.half_width);
    results.push_back({{"method", r.method},
                       {"budget", r.budget},
                       {"task", r.task},
                       {"n", r.stats.n},
                       {"mean", Number(r.stats.mean)},
                       {"ci95", Number(r.stats.half_width)},
                       {"ci95_low", ci ? Number(r.stats.low()) : Json(nullptr)},
                       {"ci95_high", ci ? Number(r.stats.high()) : Json(nullptr)}});
  }
  Json averages = Json::array();
  for (const AverageResult& a : table.averages) {
    const bool ci = !std::isnan(a.half_width) && !std::isnan(a.mean);
    averages.push_back({{"method", a.method},
                        {"budget", a.budget},
                        {"tasks", a.tasks},
                        {"n", a.n},
                        {"mean", Number(a.mean)},
                        {"ci95", Number(a.half_width)},
                        {"ci95_low", ci ? Number(a.mean - a.half_width) : Json(nullptr)},
                        {"ci95_high", ci ? Number(a.mean + a.half_width) : Json(nullptr)}});
  }
  Json doc = {{"results", std::move(results)}, {"averages", std::move(averages)}};
  // Names are arbitrary bytes: invalid UTF-8 is replaced rather than thrown on.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string RenderCsv(const ResultTable& table) {
  std::string out = "method,budget,task,n,mean,ci95,ci95_low,ci95_high\r\n";
  for (const TaskResult& r : table.results) {
    const bool ci = !std::isnan(r.stats.half_width);
    out +=
        fmt::format("{},{},{},{},{},{},{},{}\r\n", CsvField(r.method), r.budget, CsvField(r.task),
                    r.stats.n, CsvNumber(r.stats.mean), CsvNumber(r.stats.half_width),
                    ci ? CsvNumber(r.stats.low()) : "", ci ? CsvNumber(r.stats.high()) : "");
  }
  for (const AverageResult& a : table.averages) {
    const bool ci = !std::isnan(a.half_width) && !std::isnan(a.mean);
    out += fmt::format("{},{},{},{},{},{},{},{}\r\n", CsvField(a.method), a.budget, kAverageTask,
                       a.n, CsvNumber(a.mean), CsvNumber(a.half_width),
                       ci ? CsvNumber(a.mean - a.half_width) : "",
                       ci ? CsvNumber(a.mean + a.half_width) : "");
  }
  return out;
}

std::string RenderTable(const ResultTable& table, TableFormat format) {
  switch (format) {
    case TableFormat::kJson:
      return RenderJson(table);
    case TableFormat::kCsv:
      return RenderCsv(table);
    case TableFormat::kMarkdown:
      break;
  }
  return RenderMarkdown(table);
}

}  // namespace ripplekv::eval
