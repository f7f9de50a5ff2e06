#pragma once
// Which serving nodes a rollout stage covers (docs/ROLLOUTS.md, "Node selection"). Nodes are taken
// in the order of their rank, a hash of (rollout id, node id): the order is fixed per rollout and
// independent of when nodes connect, so a stage always picks the same nodes from the same set,
// and different rollouts start on different canaries.
//
// Thread-safe (pure functions).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/types.h"

namespace ripplekv::scheduler::rollout {

// The first 8 bytes, big-endian, of SHA-256(rollout_id + '\0' + node_id).
uint64_t NodeRank(std::string_view rollout_id, std::string_view node_id);

// How many nodes `stage` covers when `connected` nodes of the model are connected: a node count
// (at most `connected`), or the percent of `connected` rounded up and at least 1; 0 when no node
// is connected. A stage with neither size (never stored) covers every node.
size_t StageSize(const store::RolloutStage& stage, size_t connected);

}  // namespace ripplekv::scheduler::rollout
