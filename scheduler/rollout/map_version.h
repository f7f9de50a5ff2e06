#pragma once
// Frozen budget-map versions (docs/ROLLOUTS.md, "Budget-map versions"): a computed map and the
// inputs that made it become one immutable document in the store, named by the hash of its
// content, so freezing the same inputs twice gives the same version; and a stored version read for
// use (its frozen document parsed once), what a rollout hands to the nodes it assigns it and what
// the RPCs describe.
//
// Thread-safe (the store is; a MapVersion is immutable once made).

#include "base/status.h"
#include "method/budget_map.h"
#include "method/frozen_map.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler::rollout {

struct MapVersion {
  store::BudgetMapRecord record;  // as stored; record.digest is the version id
  method::FrozenMap frozen;       // record.budget_json, parsed
};

// DataLoss naming the version and the model when the stored document does not parse.
[[nodiscard]] StatusOr<MapVersion> ReadMapVersion(store::BudgetMapRecord record);

struct FrozenVersion {
  MapVersion map;
  bool created = false;  // false: the same inputs were frozen before (nothing was written)
};

// Freezes `map` (computed from profile version `profile_version` of map.model_hash) with its
// selection intent. Errors: the intent's and the map's (InvalidArgument) and the store's.
[[nodiscard]] StatusOr<FrozenVersion> FreezeBudgetMap(store::Store& store, uint32_t profile_version,
                                                      const method::BudgetMap& map,
                                                      const method::SelectionIntent& selection);

}  // namespace ripplekv::scheduler::rollout
