// libFuzzer target for frozen budget-map documents (method/frozen_map.h), what a scheduler stores
// and sends to serving nodes: any byte string must give a Status or a document, never a crash or
// a sanitizer report. A document that parses must write back to canonical text that reads back
// and writes the same text again, and must render in every serving format or return a Status.
// A broken property traps.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "method/frozen_map.h"

namespace {

void Require(bool property) {
  if (!property) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto frozen = ripplekv::method::FrozenMapFromJson(text);
  if (!frozen.ok()) return 0;
  auto json = ripplekv::method::FrozenMapToJson(*frozen);
  Require(json.ok());
  auto again = ripplekv::method::FrozenMapFromJson(*json);
  Require(again.ok());
  auto json_again = ripplekv::method::FrozenMapToJson(*again);
  Require(json_again.ok() && *json_again == *json);
  Require(again->selection == frozen->selection);
  for (auto format :
       {ripplekv::method::BudgetFormat::kNative, ripplekv::method::BudgetFormat::kKvpress,
        ripplekv::method::BudgetFormat::kTrtllm}) {
    (void)ripplekv::method::RenderFrozenMap(*frozen, format);  // a Status is fine
  }
  Require(ripplekv::method::RenderFrozenMap(*frozen, ripplekv::method::BudgetFormat::kNative).ok());
  return 0;
}
