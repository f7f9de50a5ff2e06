#include "scheduler/rollout/node_order.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/sha256.h"

namespace ripplekv::scheduler::rollout {

uint64_t NodeRank(std::string_view rollout_id, std::string_view node_id) {
  std::string input;
  input.reserve(rollout_id.size() + 1 + node_id.size());
  input.append(rollout_id).push_back('\0');
  input.append(node_id);
  return std::stoull(Sha256Hex(input).substr(0, 16), nullptr, 16);
}

size_t StageSize(const store::RolloutStage& stage, size_t connected) {
  if (connected == 0) return 0;
  if (stage.nodes) return std::min(connected, static_cast<size_t>(std::max(*stage.nodes, 1)));
  // percent in (0, 100], checked when the rollout was created; the epsilon keeps 10% of 50 at 5
  // although 0.1 * 50 is 5.000000000000001 in binary.
  const double exact = stage.percent.value_or(100.0) / 100.0 * static_cast<double>(connected);
  const auto size = static_cast<size_t>(std::ceil(exact - 1e-9));
  return std::clamp<size_t>(size, 1, connected);
}

}  // namespace ripplekv::scheduler::rollout
