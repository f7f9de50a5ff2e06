#pragma once
// The one place rollouts and budget-map versions cross between the API's messages
// (ripplekv/v1/rollout.proto) and the rollout library's types (scheduler/rollout/, over
// store/types.h). Field by field, nothing checked here: the library checks requests.
//
// Thread-safe (pure functions).

#include "base/status.h"
#include "method/frozen_map.h"
#include "ripplekv/v1/rollout.pb.h"
#include "scheduler/rollout/map_version.h"
#include "scheduler/rollout/rollout_types.h"
#include "store/types.h"

namespace ripplekv::scheduler::service {

namespace v1 = ::ripplekv::v1;

// Durations become milliseconds (truncated toward zero); an unset stage_timeout or
// min_ack_share stays unset (the engine's default); a stage with no size stays so (the engine
// refuses it).
rollout::RolloutRequest RolloutRequestFromProto(const v1::CreateRolloutRequest& request);
v1::Rollout RolloutToProto(const rollout::RolloutView& view);
// The map, when set, in full (tokens and document).
v1::BudgetAssignment AssignmentToProto(const rollout::Assignment& assignment);
rollout::BudgetReport BudgetReportFromProto(const v1::ReportBudgetRequest& report);

method::SelectionIntent SelectionFromProto(const v1::SelectionIntent& selection);
// A version as a message. With `full` false (listings), `tokens` and `document` are left empty.
v1::BudgetMapVersion BudgetMapVersionToProto(const rollout::MapVersion& map, bool full);
// A stored version as a message; DataLoss when its document does not parse (naming the version).
[[nodiscard]] StatusOr<v1::BudgetMapVersion> BudgetMapVersionFromRecord(
    const store::BudgetMapRecord& record, bool full);

}  // namespace ripplekv::scheduler::service
