#pragma once
// The per-head budget map the tests share (docs/BUDGETS.md, "Per-head maps"): a response map of
// three layers of two KV heads, average 100 tokens. Its head budgets {40, 53}, {150, 213}, {70, 74}
// sum to 2 x 300, and its layer budgets {46, 182, 72} are each layer's mean over its heads rounded
// (46.5 -> 46, 181.5 -> 182, 72), summing to 300: a valid native map of schema version 2.

#include <cstdint>
#include <optional>
#include <string>

#include "method/budget_map.h"

namespace ripplekv::testing {

inline method::BudgetMap PerHeadExampleMap(const std::string& model_hash,
                                           std::optional<int64_t> max_context = std::nullopt) {
  method::BudgetMap map;
  map.model_hash = model_hash;
  map.objective = method::Objective::kResponse;
  map.options = {.ratio = 4.0, .average_tokens = 100, .max_context = max_context, .per_head = true};
  map.total_tokens = 300;
  map.tokens = {46, 182, 72};
  map.head_tokens = {{40, 53}, {150, 213}, {70, 74}};
  map.multipliers = {1.0, 182.0 / 46.0, 72.0 / 46.0};
  map.normalized = {0.0, 1.0, 0.5};
  return map;
}

}  // namespace ripplekv::testing
