#pragma once
// A frozen budget map (docs/ROLLOUTS.md): the document the scheduler stores as one immutable,
// content-addressed version of a model's map, and what is rolled out to serving nodes. It holds
// the inputs that made the map (profile version, the selection method the map is meant for) and
// the native map itself:
//   {"schema_version": 1, "model_hash": H, "profile_version": P,
//    "selection": {"method": M, "params": {K: V, ...}}, "map": <native budget map,
//    budget_format.h>}
// A map of a response profile (BudgetMap::objective kResponse) is schema version 2, which records
// after "profile_version" what the profile measured: "objective": "response", "selector": S (the
// selector its response was measured with; "selection" stays the method the map is meant for,
// recorded and never interpreted). A noise map is written as version 1, byte for byte as before
// the objective existed, so its version id is unchanged; a version 1 document reads as a noise
// map. The native "map" member carries neither field: reading puts them into FrozenMap::map.
// The "map" member is versioned on its own (its schema_version, budget_format.h): a per-head map
// is embedded as native version 2, with no change to the frozen document's version, and a reader
// that does not know native version 2 refuses the document with FailedPrecondition naming it.
// The text is canonical (keys in this order, params sorted by key, budget_format.h's number
// form), so equal inputs give equal bytes; the store names a version by the hash of these bytes.
//
// Thread-safe (pure functions).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "method/budget_format.h"
#include "method/budget_map.h"

namespace ripplekv::method {

// The newest frozen-map schema version this code reads and writes (a response map's), and the
// version of a noise map's document. This code reads both.
inline constexpr int kFrozenMapSchemaVersion = 2;
inline constexpr int kFrozenMapNoiseSchemaVersion = 1;

// What a map is meant for: the KV-cache selection method the serving engine runs with it and its
// parameters. Recorded, never interpreted.
struct SelectionIntent {
  std::string method;                         // [a-z0-9_+-], at most 64; may be empty
  std::map<std::string, std::string> params;  // at most 32; keys 1..64, values at most 256 bytes

  friend bool operator==(const SelectionIntent&, const SelectionIntent&) = default;
};

struct FrozenMap {
  uint32_t profile_version = 0;  // >= 1
  SelectionIntent selection;
  // Valid (ValidateBudgetMap); map.model_hash is the model's hash, map.objective and map.selector
  // what the profile measured (ComputeBudgetMap() fills them).
  BudgetMap map;
};

// InvalidArgument naming the field ("selection.params[\"window\"]") when an intent breaks the
// limits above.
[[nodiscard]] Status ValidateSelectionIntent(const SelectionIntent& selection);

// The canonical document of `frozen`. Errors: InvalidArgument (an invalid map or intent,
// profile_version 0).
[[nodiscard]] StatusOr<std::string> FrozenMapToJson(const FrozenMap& frozen);

// Parses a frozen-map document strictly (unknown or missing fields are errors, named by JSON
// path; a version 2 document must record objective response and its selector). Errors as
// BudgetMapFromJson(), prefixed "frozen map: "; FailedPrecondition for a schema_version other
// than 1 and 2.
[[nodiscard]] StatusOr<FrozenMap> FrozenMapFromJson(std::string_view json_text);

// The bytes a serving node holds for `frozen` in `format`: FormatBudgetMap() of the map, with
// the map's max_context as the kvpress context length (InvalidArgument for kvpress when the map
// has none).
[[nodiscard]] StatusOr<std::string> RenderFrozenMap(const FrozenMap& frozen, BudgetFormat format);

}  // namespace ripplekv::method
