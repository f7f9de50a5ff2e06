#include "scheduler/service/budget_versions.h"

#include <google/protobuf/util/time_util.h>

#include <utility>

#include "base/strings.h"
#include "proto/budget_params.h"

namespace ripplekv::scheduler::rollout {

method::SelectionIntent SelectionFromProto(const v1::SelectionIntent& selection) {
  method::SelectionIntent out{.method = selection.method()};
  for (const auto& [key, value] : selection.params()) out.params.emplace(key, value);
  return out;
}

StatusOr<v1::BudgetMapVersion> BudgetMapVersionFromRecord(const store::BudgetMapRecord& record,
                                                          bool full) {
  StatusOr<method::FrozenMap> frozen = method::FrozenMapFromJson(record.budget_json);
  if (!frozen.ok()) {
    return absl::DataLossError(Cat("budget map ", record.digest, " of model ", record.model_hash,
                                   " is damaged: ", std::string(frozen.status().message())));
  }
  v1::BudgetMapVersion out;
  out.set_model_hash(record.model_hash);
  out.set_version(record.digest);
  out.set_sequence(record.version);
  out.set_profile_version(record.profile_version);
  *out.mutable_params() = v1::BudgetParamsFromOptions(frozen->map.options);
  out.mutable_selection()->set_method(frozen->selection.method);
  for (const auto& [key, value] : frozen->selection.params) {
    (*out.mutable_selection()->mutable_params())[key] = value;
  }
  out.set_total_tokens(frozen->map.total_tokens);
  *out.mutable_create_time() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(record.created_at_ms);
  if (full) {
    for (int64_t t : frozen->map.tokens) out.add_tokens(t);
    out.set_document(record.budget_json);
  }
  return out;
}

StatusOr<v1::CreateBudgetMapResponse> FreezeBudgetMap(store::Store& store, uint32_t profile_version,
                                                      const method::BudgetMap& map,
                                                      const method::SelectionIntent& selection) {
  ASSIGN_OR_RETURN(std::string document,
                   method::FrozenMapToJson(
                       {.profile_version = profile_version, .selection = selection, .map = map}));
  ASSIGN_OR_RETURN(store::BudgetMapPut put,
                   store.PutBudgetMap(map.model_hash, profile_version, document));
  v1::CreateBudgetMapResponse response;
  ASSIGN_OR_RETURN(*response.mutable_map(), BudgetMapVersionFromRecord(put.map, /*full=*/true));
  response.set_existing(!put.created);
  return response;
}

}  // namespace ripplekv::scheduler::rollout
