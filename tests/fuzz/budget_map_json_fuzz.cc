// libFuzzer target for native budget-map JSON (method/budget_format.h): any byte string
// must give a Status or a map, never a crash or a sanitizer report. A map that parses must write
// back (BudgetMapToJson), read back, and write the same text again; it must sum to its total, and
// the serving formats (kvpress, trtllm) must either convert it or return a Status. A per-head map
// (schema version 2) must hold the per-head invariants, and trtllm must refuse it. A broken
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
  // A per-head map (schema version 2): H heads everywhere, summing to H x T, each layer's budget
  // the rounded mean of its heads.
  Require(m.options.per_head == !m.head_tokens.empty());
  int64_t largest_head = 0;
  if (!m.head_tokens.empty()) {
    const size_t heads = m.head_tokens[0].size();
    Require(heads >= 1 && m.head_tokens.size() == m.tokens.size());
    __int128 head_sum = 0;
    for (size_t l = 0; l < m.head_tokens.size(); ++l) {
      Require(m.head_tokens[l].size() == heads);
      __int128 layer_sum = 0;
      for (int64_t b : m.head_tokens[l]) {
        Require(b >= m.options.min_tokens);
        layer_sum += b;
        largest_head = std::max(largest_head, b);
      }
      const __int128 floor = layer_sum / static_cast<__int128>(heads);
      Require(m.tokens[l] >= floor && m.tokens[l] <= floor + 1);
      head_sum += layer_sum;
    }
    Require(head_sum == static_cast<__int128>(heads) * m.total_tokens);
  }

  auto json = ripplekv::method::BudgetMapToJson(m);
  Require(json.ok());
  auto again = ripplekv::method::BudgetMapFromJson(*json);
  Require(again.ok());
  auto json_again = ripplekv::method::BudgetMapToJson(*again);
  Require(json_again.ok());
  Require(*json_again == *json);

  // Serving formats: the largest budget as context length always converts; others may refuse.
  // (A per-head map's largest head budget bounds its context length, and trtllm refuses it.)
  const int64_t largest =
      std::max(*std::max_element(m.tokens.begin(), m.tokens.end()), largest_head);
  for (int64_t context_len : {largest, largest + 1, int64_t{4096}, m.total_tokens}) {
    auto kvpress = ripplekv::method::FormatBudgetMap(m, BudgetFormat::kKvpress, context_len);
    if (context_len >= largest) Require(kvpress.ok());
  }
  Require(ripplekv::method::FormatBudgetMap(m, BudgetFormat::kTrtllm, std::nullopt).ok() ==
          m.head_tokens.empty());
  return 0;
}
