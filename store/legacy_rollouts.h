#pragma once
// Rollout values as schema version 3 stored them: the wire bytes of the API's messages
// ripplekv.v1.Rollout (rollout_id cleared; the key holds the id) and ripplekv.v1.RolloutNode, as
// rollout.proto defined them at that version (docs/STORE.md, "Schema versions"). Read only by the
// migration to version 4, which rewrites them as RolloutRecord and RolloutNodeRecord values. A
// reader of the protobuf wire format for these two messages alone, frozen at that definition, so
// that the store needs no protobuf and a later change of the API cannot change what it reads.
// Internal to store/.
//
// Decoding follows protobuf's rules (a missing field is its zero value, the last of a repeated
// scalar wins, unknown fields are skipped); truncated bytes, a known field of another wire type
// and an enum value the version did not have are DataLoss naming the field. Durations and
// timestamps become milliseconds (truncated toward zero), as the engine of version 3 read them.
//
// Pure and thread-safe.

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "store/types.h"

namespace ripplekv::store {

[[nodiscard]] StatusOr<RolloutRecord> DecodeV3Rollout(uint64_t id, std::string_view bytes);
[[nodiscard]] StatusOr<RolloutNodeRecord> DecodeV3RolloutNode(std::string_view node_id,
                                                              std::string_view bytes);

}  // namespace ripplekv::store
