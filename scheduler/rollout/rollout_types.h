#pragma once
// What callers of the rollout engine (rollout_engine.h) hand in and get back: a rollout request,
// a rollout as shown to operators (its stored record with counts and node states), a node's
// assignment and a node's report. Plain structs over the store's rollout types (store/types.h);
// scheduler/service/ converts them to and from the API's messages (ripplekv/v1/rollout.proto).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/rollout/map_version.h"
#include "store/types.h"

namespace ripplekv::scheduler::rollout {

// Defaults and limits of a rollout request (docs/ROLLOUTS.md).
inline constexpr int64_t kDefaultStageTimeoutMs = 5 * 60 * 1000;
inline constexpr int kMaxStages = 16;

// A request to start a rollout; unset fields take the defaults.
struct RolloutRequest {
  std::string model_hash;
  std::string map_version;                  // required
  std::vector<store::RolloutStage> stages;  // 1..kMaxStages, growing; empty: 1, 10%, 50%, 100%
  int64_t soak_ms = 0;                      // >= 0
  std::optional<int64_t> stage_timeout_ms;  // > 0; unset: kDefaultStageTimeoutMs
  std::optional<double> min_ack_share;      // (0, 1]; unset: 1
};

// One node's standing in a rollout as shown to operators.
struct NodeView {
  store::RolloutNodeRecord record;
  bool connected = false;  // has a WatchBudgets stream open now
};

// A rollout as shown to operators.
struct RolloutView {
  std::string rollout_id;               // "r" + record.id
  store::RolloutRecord record;          // the stored state
  int32_t stage_nodes = 0;              // nodes in the rollout (every stage so far)
  int32_t acknowledged = 0;             // of those, applied
  int32_t pending = 0;                  // of those, not yet reported
  int32_t failed = 0;                   // of those, failed
  int32_t connected_nodes = 0;          // of the model, now
  std::optional<int64_t> soak_left_ms;  // while running and soaking
  std::vector<NodeView> nodes;          // by node id; only when asked for
};

// What a node of a model should hold. `version` empty: no map (remove it).
struct Assignment {
  std::string model_hash;
  std::string version;
  std::string rollout_id;                 // the rollout that assigned it; "" when none did
  std::shared_ptr<const MapVersion> map;  // set when `version` is
};

// A node's outcome for an assignment.
struct BudgetReport {
  std::string node_id;
  std::string model_hash;
  std::string version;  // the version the report is about ("": the map was removed)
  bool ok = false;      // written and applied
  std::string error;    // when !ok: one line
};

}  // namespace ripplekv::scheduler::rollout
