#pragma once
// Valid rollout and rollout node records for the store's rollout tests.

#include <string>

#include "store/types.h"

namespace ripplekv::store::testing {

// A running rollout of `model_hash` with stages (1 node, 100%); id unset.
inline RolloutRecord SampleRollout(const std::string& model_hash = "ab") {
  return {.model_hash = model_hash,
          .map_version = "0123456789abcdef",
          .previous_version = "",
          .stages = {{.nodes = 1}, {.percent = 100}},
          .soak_ms = 0,
          .stage_timeout_ms = 300'000,
          .min_ack_share = 1.0,
          .state = RolloutState::kRunning,
          .stage = 0,
          .created_at_ms = 1'700'000'000'000,
          .updated_at_ms = 1'700'000'000'000,
          .stage_started_at_ms = 1'700'000'000'000};
}

// Node `node_id` in `state`, assigned the sample rollout's map.
inline RolloutNodeRecord SampleNode(const std::string& node_id,
                                    NodeMapState state = NodeMapState::kPending) {
  return {.node_id = node_id,
          .in_rollout = true,
          .assigned_version = "0123456789abcdef",
          .held_version = state == NodeMapState::kApplied ? "0123456789abcdef" : "",
          .state = state,
          .error = state == NodeMapState::kFailed ? "apply hook exited 3" : "",
          .updated_at_ms = 1'700'000'000'500};
}

}  // namespace ripplekv::store::testing
