#include "scheduler/service/rollout_convert.h"

#include <google/protobuf/util/time_util.h>

#include "proto/budget_params.h"

namespace ripplekv::scheduler::service {
namespace {

using google::protobuf::util::TimeUtil;

v1::RolloutState StateToProto(store::RolloutState state) {
  switch (state) {
    case store::RolloutState::kRunning:
      return v1::ROLLOUT_STATE_RUNNING;
    case store::RolloutState::kPaused:
      return v1::ROLLOUT_STATE_PAUSED;
    case store::RolloutState::kSucceeded:
      return v1::ROLLOUT_STATE_SUCCEEDED;
    case store::RolloutState::kRolledBack:
      return v1::ROLLOUT_STATE_ROLLED_BACK;
  }
  return v1::ROLLOUT_STATE_UNSPECIFIED;
}

v1::NodeMapState NodeStateToProto(store::NodeMapState state) {
  switch (state) {
    case store::NodeMapState::kPending:
      return v1::NODE_MAP_STATE_PENDING;
    case store::NodeMapState::kApplied:
      return v1::NODE_MAP_STATE_APPLIED;
    case store::NodeMapState::kFailed:
      return v1::NODE_MAP_STATE_FAILED;
    case store::NodeMapState::kUnspecified:
      break;
  }
  return v1::NODE_MAP_STATE_UNSPECIFIED;
}

}  // namespace

rollout::RolloutRequest RolloutRequestFromProto(const v1::CreateRolloutRequest& request) {
  rollout::RolloutRequest out{.model_hash = request.model_hash(),
                              .map_version = request.map_version(),
                              .soak_ms = TimeUtil::DurationToMilliseconds(request.soak())};
  for (const v1::RolloutStage& stage : request.stages()) {
    store::RolloutStage& s = out.stages.emplace_back();
    if (stage.size_case() == v1::RolloutStage::kNodes) s.nodes = stage.nodes();
    if (stage.size_case() == v1::RolloutStage::kPercent) s.percent = stage.percent();
  }
  if (request.has_stage_timeout()) {
    out.stage_timeout_ms = TimeUtil::DurationToMilliseconds(request.stage_timeout());
  }
  if (request.has_min_ack_share()) out.min_ack_share = request.min_ack_share();
  return out;
}

v1::Rollout RolloutToProto(const rollout::RolloutView& view) {
  const store::RolloutRecord& r = view.record;
  v1::Rollout out;
  out.set_rollout_id(view.rollout_id);
  out.set_model_hash(r.model_hash);
  out.set_map_version(r.map_version);
  out.set_previous_version(r.previous_version);
  for (const store::RolloutStage& stage : r.stages) {
    v1::RolloutStage* s = out.add_stages();
    if (stage.nodes) s->set_nodes(*stage.nodes);
    if (stage.percent) s->set_percent(*stage.percent);
  }
  *out.mutable_soak() = TimeUtil::MillisecondsToDuration(r.soak_ms);
  *out.mutable_stage_timeout() = TimeUtil::MillisecondsToDuration(r.stage_timeout_ms);
  out.set_min_ack_share(r.min_ack_share);
  out.set_state(StateToProto(r.state));
  out.set_stage(r.stage);
  out.set_pause_reason(r.pause_reason);
  *out.mutable_create_time() = TimeUtil::MillisecondsToTimestamp(r.created_at_ms);
  *out.mutable_update_time() = TimeUtil::MillisecondsToTimestamp(r.updated_at_ms);
  *out.mutable_stage_start_time() = TimeUtil::MillisecondsToTimestamp(r.stage_started_at_ms);
  out.set_stage_nodes(view.stage_nodes);
  out.set_acknowledged(view.acknowledged);
  out.set_pending(view.pending);
  out.set_failed(view.failed);
  out.set_connected_nodes(view.connected_nodes);
  if (view.soak_left_ms) {
    *out.mutable_soak_left() = TimeUtil::MillisecondsToDuration(*view.soak_left_ms);
  }
  for (const rollout::NodeView& node : view.nodes) {
    v1::RolloutNode* n = out.add_nodes();
    n->set_node_id(node.record.node_id);
    n->set_in_rollout(node.record.in_rollout);
    n->set_assigned_version(node.record.assigned_version);
    n->set_held_version(node.record.held_version);
    n->set_state(NodeStateToProto(node.record.state));
    n->set_error(node.record.error);
    n->set_connected(node.connected);
    if (node.record.updated_at_ms != 0) {
      *n->mutable_update_time() = TimeUtil::MillisecondsToTimestamp(node.record.updated_at_ms);
    }
  }
  return out;
}

v1::BudgetAssignment AssignmentToProto(const rollout::Assignment& assignment) {
  v1::BudgetAssignment out;
  out.set_model_hash(assignment.model_hash);
  out.set_version(assignment.version);
  out.set_rollout_id(assignment.rollout_id);
  if (assignment.map != nullptr) {
    *out.mutable_map() = BudgetMapVersionToProto(*assignment.map, /*full=*/true);
  }
  return out;
}

rollout::BudgetReport BudgetReportFromProto(const v1::ReportBudgetRequest& report) {
  return {.node_id = report.node_id(),
          .model_hash = report.model_hash(),
          .version = report.version(),
          .ok = report.ok(),
          .error = report.error()};
}

method::SelectionIntent SelectionFromProto(const v1::SelectionIntent& selection) {
  method::SelectionIntent out{.method = selection.method()};
  for (const auto& [key, value] : selection.params()) out.params.emplace(key, value);
  return out;
}

v1::BudgetMapVersion BudgetMapVersionToProto(const rollout::MapVersion& map, bool full) {
  const store::BudgetMapRecord& record = map.record;
  const method::FrozenMap& frozen = map.frozen;
  v1::BudgetMapVersion out;
  out.set_model_hash(record.model_hash);
  out.set_version(record.digest);
  out.set_sequence(record.version);
  out.set_profile_version(record.profile_version);
  *out.mutable_params() = v1::BudgetParamsFromOptions(frozen.map.options);
  out.mutable_selection()->set_method(frozen.selection.method);
  for (const auto& [key, value] : frozen.selection.params) {
    (*out.mutable_selection()->mutable_params())[key] = value;
  }
  out.set_total_tokens(frozen.map.total_tokens);
  *out.mutable_create_time() = TimeUtil::MillisecondsToTimestamp(record.created_at_ms);
  if (full) {
    for (int64_t t : frozen.map.tokens) out.add_tokens(t);
    out.set_document(record.budget_json);
  }
  return out;
}

StatusOr<v1::BudgetMapVersion> BudgetMapVersionFromRecord(const store::BudgetMapRecord& record,
                                                          bool full) {
  ASSIGN_OR_RETURN(rollout::MapVersion map, rollout::ReadMapVersion(record));
  return BudgetMapVersionToProto(map, full);
}

}  // namespace ripplekv::scheduler::service
