#pragma once
// Frozen budget-map versions (docs/ROLLOUTS.md, "Budget-map versions"): a computed map and the
// inputs that made it become one immutable document in the store, named by the hash of its
// content, so freezing the same inputs twice gives the same version. Also the message forms of
// stored versions, shared by the RPCs and the rollout engine.
//
// Thread-safe (the store is).

#include <cstdint>

#include "base/status.h"
#include "method/budget_map.h"
#include "method/frozen_map.h"
#include "ripplekv/v1/rollout.pb.h"
#include "store/store.h"

namespace ripplekv::scheduler::rollout {

namespace v1 = ::ripplekv::v1;

method::SelectionIntent SelectionFromProto(const v1::SelectionIntent& selection);

// A stored version as a message. With `full` false (listings), `tokens` and `document` are left
// empty. DataLoss when the stored document does not parse (naming the version).
[[nodiscard]] StatusOr<v1::BudgetMapVersion> BudgetMapVersionFromRecord(
    const store::BudgetMapRecord& record, bool full);

// Freezes `map` (computed from profile version `profile_version` of map.model_hash) with its
// selection intent. Returns the version and whether it existed. Errors: the intent's
// (InvalidArgument) and the store's.
[[nodiscard]] StatusOr<v1::CreateBudgetMapResponse> FreezeBudgetMap(
    store::Store& store, uint32_t profile_version, const method::BudgetMap& map,
    const method::SelectionIntent& selection);

}  // namespace ripplekv::scheduler::rollout
