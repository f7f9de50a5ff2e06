// libFuzzer target for native budget-map JSON (method/budget_format.h): any byte string
// must give a Status or a map, never a crash or a sanitizer report. A map that parses must write
// back (BudgetMapToJson), read back, and write the same text again; it must sum to its total, and
// the serving formats (kvpress, trtllm) must either convert it or return a Status. A broken
// property traps.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "method/budget_format.h"
#include "method/budget_map.h"

namespace {

using ripplekv::method::BudgetFormat;
using ripplekv::method::BudgetMap;

void Require(bool property) {
  if (!property) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto map = ripplekv::method::BudgetMapFromJson(text);
  if (!map.ok()) return 0;

  // A map that reads back is what ValidateBudgetMap() promises: an exact total, in bounds.
  const BudgetMap& m = *map;
  __int128 sum = 0;
  for (int64_t t : m.tokens) {
    Require(t >= m.options.min_tokens);
    Require(!m.options.max_tokens || t <= *m.options.max_tokens);
    sum += t;
  }
  Require(sum == m.total_tokens);
  Require(m.total_tokens == ripplekv::method::TotalTokens(m.tokens.size(), m.options));

  auto json = ripplekv::method::BudgetMapToJson(m);
  Require(json.ok());
  auto again = ripplekv::method::BudgetMapFromJson(*json);
  Require(again.ok());
  auto json_again = ripplekv::method::BudgetMapToJson(*again);
  Require(json_again.ok());
  Require(*json_again == *json);

  // Serving formats: the largest budget as context length always converts; others may refuse.
  const int64_t largest = *std::max_element(m.tokens.begin(), m.tokens.end());
  for (int64_t context_len : {largest, largest + 1, int64_t{4096}, m.total_tokens}) {
    auto kvpress = ripplekv::method::FormatBudgetMap(m, BudgetFormat::kKvpress, context_len);
    if (context_len >= largest) Require(kvpress.ok());
  }
  Require(ripplekv::method::FormatBudgetMap(m, BudgetFormat::kTrtllm, std::nullopt).ok());
  return 0;
}
