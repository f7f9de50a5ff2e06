#pragma once
// The verdict table of `ripplekv compare --verdict` (docs/EVAL.md, "The verdict table"): for every
// selection S with records of `ripple+S`, RippleKV's map is compared with each baseline of S the
// records hold, per task and compressed budget, and every cell is judged after one Holm
// correction over the whole table.
//
// Baselines of selection S (methods as `ripplekv eval` names them, eval/compress/method.h and
// eval/compress/control_maps.h):
//   uniform   `uniform+S`, or its shorthand (snapkv, h2o, streaming)
//   pyramid   `pyramid+S`, or `pyramidkv` for S = snapkv
//   cake      `cake+S`, or `cake` for S = cake
//   permuted  every `ripple-perm<k>+S`, k >= 1: per example the mean of the k maps' scores
//   reversed  `ripple-rev+S`
//   spike     every `spike<k>+S`, k >= 1: per example the mean of the k maps' scores
// Other methods in the records are ignored.
// Thread-safety: pure functions.

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/compare_rows.h"
#include "eval/records.h"
#include "nlohmann/json.hpp"

namespace ripplekv::cli {

// One cell of the verdict: ripple+S against one baseline at one task and budget.
struct VerdictCell {
  std::string selection;  // S: "snapkv", "h2o", "streaming" or "cake"
  std::string baseline;   // "uniform", "pyramid", "cake", "permuted", "reversed", "spike"
  std::vector<std::string> methods;  // the records' methods whose scores make the baseline
  Row row;                           // a = ripple+S; b = the baseline; statistics computed
  double mean_a = 0.0;               // raw mean scores over the row's examples
  double mean_b = 0.0;
  double diff = 0.0;               // mean_a - mean_b, raw (not oriented)
  std::optional<double> rel_diff;  // 100 * diff / |mean_b| (%); none when mean_b = 0
  std::string verdict;             // "beats", "loses" or "n.s." at alpha after Holm
  // permuted only: ripple+S's place among its k maps by mean score over the row's examples,
  // 1 + the number of maps strictly better (lower-is-better tasks: lower); of = k + 1.
  std::optional<int> rank;
  int of = 0;
};

// Every cell, in order: selections snapkv, h2o, streaming, cake; tasks as they first appear in
// the records; budgets ascending; baselines in the order above. The full cache (budget 0) is left
// out. A cell needs an example scored by ripple+S and the baseline (for permuted and spike: by
// every one of their maps, with a warning on stderr naming the examples' count left out). Holm's
// correction runs over all returned cells as one family; a cell "beats" (or "loses") when its
// p_holm < options.alpha and the test's direction favours ripple+S (the baseline).
// Errors (InvalidArgument, naming `records_path`): no `ripple+S` method in the records (naming
// the methods it needs and those it has), no baseline with scores on ripple+S's examples; those
// of ComputeRow.
[[nodiscard]] StatusOr<std::vector<VerdictCell>> BuildVerdict(
    const std::vector<eval::ScoreRecord>& records, const std::string& records_path,
    const RowStatsOptions& options);

// The verdict as Markdown: a caption stating the Holm family size and alpha, then per selection a
// table with rows "task | budget" and a column per baseline present, each cell e.g.
// "beats (p 3e-05, -0.012, -8.3%)" (p_Holm, diff, rel_diff; permuted adds "rank 1 of 11").
std::string VerdictMarkdown(const std::vector<VerdictCell>& cells, const RowStatsOptions& options);

// The verdict as JSON: {"alpha", "resamples", "seed", "family", "cells": [{"selection", "a",
// "baseline", "methods", "task", "budget", "n", "mean_a", "mean_b", "diff", "rel_diff", "p",
// "p_holm", "verdict", "rank", "of"}]}; rel_diff, rank and of are null where they do not apply.
nlohmann::ordered_json VerdictJson(const std::vector<VerdictCell>& cells,
                                   const RowStatsOptions& options);

}  // namespace ripplekv::cli
