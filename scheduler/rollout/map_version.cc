#include "scheduler/rollout/map_version.h"

#include <string>
#include <utility>

#include "base/strings.h"

namespace ripplekv::scheduler::rollout {

StatusOr<MapVersion> ReadMapVersion(store::BudgetMapRecord record) {
  StatusOr<method::FrozenMap> frozen = method::FrozenMapFromJson(record.budget_json);
  if (!frozen.ok()) {
    return absl::DataLossError(Cat("budget map ", record.digest, " of model ", record.model_hash,
                                   " is damaged: ", std::string(frozen.status().message())));
  }
  return MapVersion{.record = std::move(record), .frozen = *std::move(frozen)};
}

StatusOr<FrozenVersion> FreezeBudgetMap(store::Store& store, uint32_t profile_version,
                                        const method::BudgetMap& map,
                                        const method::SelectionIntent& selection) {
  method::FrozenMap frozen{.profile_version = profile_version, .selection = selection, .map = map};
  ASSIGN_OR_RETURN(std::string document, method::FrozenMapToJson(frozen));
  ASSIGN_OR_RETURN(store::BudgetMapPut put,
                   store.PutBudgetMap(map.model_hash, profile_version, document));
  return FrozenVersion{.map = {.record = std::move(put.map), .frozen = std::move(frozen)},
                       .created = put.created};
}

}  // namespace ripplekv::scheduler::rollout
