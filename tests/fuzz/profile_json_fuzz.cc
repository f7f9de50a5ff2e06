// libFuzzer target for sensitivity-profile JSON (method/profile.h): any byte string must
// give a Status or a profile, never a crash or a sanitizer report. A profile that parses must
// write back (ProfileToJson), read back, and write the same text again. Its budget maps, for a few
// fixed option sets, must sum to exactly the requested total, stay in bounds and round-trip
// through the native budget-map JSON. A broken property traps.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"

namespace {

using ripplekv::method::BudgetMap;
using ripplekv::method::BudgetOptions;
using ripplekv::method::Normalization;
using ripplekv::method::SensitivityProfile;

// Profiles with more layers than this skip budget mapping (keeps each run fast).
constexpr int64_t kMaxMappedLayers = 4096;

void Require(bool property) {
  if (!property) __builtin_trap();
}

BudgetOptions Options(double ratio, int64_t average, std::optional<int64_t> total, int64_t min,
                      std::optional<int64_t> max, Normalization normalization,
                      std::optional<int64_t> max_context = std::nullopt) {
  BudgetOptions o;
  o.ratio = ratio;
  o.average_tokens = average;
  o.total_tokens = total;
  o.min_tokens = min;
  o.max_tokens = max;
  o.normalization = normalization;
  o.max_context = max_context;
  return o;
}

// Budget mapping of a valid profile: when it succeeds, the map is exact and consistent.
void CheckBudgetMaps(const SensitivityProfile& profile) {
  if (profile.model.n_layers > kMaxMappedLayers) return;
  const BudgetOptions option_sets[] = {
      Options(2.0, 64, std::nullopt, 1, std::nullopt, Normalization::kMinMax),
      Options(8.0, 16, std::nullopt, 4, 64, Normalization::kRank),
      Options(1.0, 0, 1001, 1, std::nullopt, Normalization::kLogMinMax),
      Options(1e6, 1000, std::nullopt, 2, 3000, Normalization::kLogMinMax, 4096),
      Options(1e300, 0, int64_t{1} << 40, 1, std::nullopt, Normalization::kMinMax),
  };
  for (const BudgetOptions& options : option_sets) {
    auto map = ripplekv::method::ComputeBudgetMap(profile, options);
    if (!map.ok()) continue;
    const size_t L = static_cast<size_t>(profile.model.n_layers);
    const int64_t total = ripplekv::method::TotalTokens(L, options);
    Require(map->total_tokens == total);
    Require(map->tokens.size() == L);
    int64_t sum = 0;
    for (int64_t t : map->tokens) {
      Require(t >= options.min_tokens);
      Require(!options.max_tokens || t <= *options.max_tokens);
      sum += t;
    }
    Require(sum == total);
    Require(ripplekv::method::ValidateBudgetMap(*map).ok());
    auto json = ripplekv::method::BudgetMapToJson(*map);
    Require(json.ok());
    auto back = ripplekv::method::BudgetMapFromJson(*json);
    Require(back.ok());
    Require(back->tokens == map->tokens);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto profile = ripplekv::method::ProfileFromJson(text);
  if (!profile.ok()) return 0;

  auto json = ripplekv::method::ProfileToJson(*profile);
  Require(json.ok());
  auto again = ripplekv::method::ProfileFromJson(*json);
  Require(again.ok());
  auto json_again = ripplekv::method::ProfileToJson(*again);
  Require(json_again.ok());
  Require(*json_again == *json);

  CheckBudgetMaps(*profile);
  return 0;
}
