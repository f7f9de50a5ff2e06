#pragma once
// Rollout values as schema version 3 stored them: the wire bytes of the API's messages
// ripplekv.v1.Rollout (rollout_id cleared; the key holds the id) and ripplekv.v1.RolloutNode
// (docs/STORE.md, "Schema versions"). Read only by the migration to version 4, which rewrites them
// as RolloutRecord and RolloutNodeRecord values. Parsed by protobuf against a frozen copy of those
// two messages as rollout.proto defined them at that version (v3_rollout.proto, a package of the
// store's own), so that a later change of the API cannot change what is read. Protobuf stays
// behind this header: the rest of the store sees only its types. Internal to store/.
//
// Decoding follows protobuf's rules (a missing field is its zero value, the last of a repeated
// scalar wins, unknown fields and those version 3 never meant anything by are skipped). Bytes
// protobuf does not parse, a field this schema knows sent with another wire type, and an enum
// value the version did not have are DataLoss naming the record (and the field). Durations and
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
