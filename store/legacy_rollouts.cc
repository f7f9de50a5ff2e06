#include "store/legacy_rollouts.h"

#include <bit>
#include <string>

#include "base/strings.h"

namespace ripplekv::store {
namespace {

// Protobuf wire types.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

Status Corrupt(std::string_view what, std::string_view why) {
  return absl::DataLossError(Cat("version-3 ", what, " ", why));
}

// Reads one message's fields in order.
class WireReader {
 public:
  WireReader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  bool done() const { return bytes_.empty(); }

  // The next field's number and wire type.
  StatusOr<std::pair<uint32_t, uint32_t>> Tag() {
    ASSIGN_OR_RETURN(uint64_t tag, Varint());
    if ((tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) return Corrupt(what_, "has a bad field tag");
    return std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(tag >> 3), tag & 7);
  }

  StatusOr<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (bytes_.empty()) return Corrupt(what_, "is truncated");
      const auto byte = static_cast<uint8_t>(bytes_.front());
      bytes_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Corrupt(what_, "has a varint longer than 10 bytes");
  }

  StatusOr<std::string_view> Length() {
    ASSIGN_OR_RETURN(uint64_t size, Varint());
    if (size > bytes_.size()) return Corrupt(what_, "is truncated");
    std::string_view out = bytes_.substr(0, size);
    bytes_.remove_prefix(size);
    return out;
  }

  StatusOr<double> Fixed64Double() {
    if (bytes_.size() < 8) return Corrupt(what_, "is truncated");
    uint64_t bits = 0;
    for (int i = 7; i >= 0; --i) bits = (bits << 8) | static_cast<uint8_t>(bytes_[i]);
    bytes_.remove_prefix(8);
    return std::bit_cast<double>(bits);
  }

  Status Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint:
        return Varint().status();
      case kFixed64:
        return Fixed64Double().status();
      case kLength:
        return Length().status();
      case kFixed32:
        if (bytes_.size() < 4) return Corrupt(what_, "is truncated");
        bytes_.remove_prefix(4);
        return absl::OkStatus();
      default:
        return Corrupt(what_, Cat("has wire type ", wire_type, ", which it never had"));
    }
  }

  // DataLoss unless field `name` came with `want`.
  Status Expect(uint32_t got, uint32_t want, std::string_view name) const {
    if (got == want) return absl::OkStatus();
    return Corrupt(what_, Cat("field '", name, "' has wire type ", got, ", not ", want));
  }

  const std::string& what() const { return what_; }

 private:
  std::string_view bytes_;
  const std::string what_;
};

// google.protobuf.Duration or Timestamp (seconds = 1, nanos = 2) as milliseconds.
StatusOr<int64_t> MillisFrom(std::string_view bytes, const std::string& what) {
  WireReader r(bytes, what);
  int64_t seconds = 0;
  int32_t nanos = 0;
  while (!r.done()) {
    ASSIGN_OR_RETURN(auto tag, r.Tag());
    const auto [field, wire] = tag;
    if (field == 1 || field == 2) {
      RETURN_IF_ERROR(r.Expect(wire, kVarint, field == 1 ? "seconds" : "nanos"));
      ASSIGN_OR_RETURN(uint64_t v, r.Varint());
      if (field == 1) {
        seconds = static_cast<int64_t>(v);
      } else {
        nanos = static_cast<int32_t>(v);
      }
    } else {
      RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  constexpr int64_t kMaxSeconds = INT64_MAX / 1000 - 1;
  if (seconds > kMaxSeconds || seconds < -kMaxSeconds) return Corrupt(what, "is out of range");
  return seconds * 1000 + nanos / 1'000'000;
}

StatusOr<RolloutStage> StageFrom(std::string_view bytes, const std::string& what) {
  WireReader r(bytes, what);
  RolloutStage stage;
  while (!r.done()) {
    ASSIGN_OR_RETURN(auto tag, r.Tag());
    const auto [field, wire] = tag;
    if (field == 1) {  // oneof size: the last member set wins
      RETURN_IF_ERROR(r.Expect(wire, kVarint, "nodes"));
      ASSIGN_OR_RETURN(uint64_t v, r.Varint());
      stage = {.nodes = static_cast<int32_t>(v)};
    } else if (field == 2) {
      RETURN_IF_ERROR(r.Expect(wire, kFixed64, "percent"));
      ASSIGN_OR_RETURN(double v, r.Fixed64Double());
      stage = {.percent = v};
    } else {
      RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  return stage;
}

StatusOr<std::string> StringFrom(WireReader& r, uint32_t wire, std::string_view name) {
  RETURN_IF_ERROR(r.Expect(wire, kLength, name));
  ASSIGN_OR_RETURN(std::string_view v, r.Length());
  return std::string(v);
}

}  // namespace

StatusOr<RolloutRecord> DecodeV3Rollout(uint64_t id, std::string_view bytes) {
  const std::string what = Cat("rollout ", id);
  WireReader r(bytes, what);
  RolloutRecord out;
  out.id = id;
  uint64_t state = 0;
  while (!r.done()) {
    ASSIGN_OR_RETURN(auto tag, r.Tag());
    const auto [field, wire] = tag;
    switch (field) {
      case 2: {
        ASSIGN_OR_RETURN(out.model_hash, StringFrom(r, wire, "model_hash"));
        break;
      }
      case 3: {
        ASSIGN_OR_RETURN(out.map_version, StringFrom(r, wire, "map_version"));
        break;
      }
      case 4: {
        ASSIGN_OR_RETURN(out.previous_version, StringFrom(r, wire, "previous_version"));
        break;
      }
      case 5: {
        RETURN_IF_ERROR(r.Expect(wire, kLength, "stages"));
        ASSIGN_OR_RETURN(std::string_view v, r.Length());
        ASSIGN_OR_RETURN(RolloutStage stage,
                         StageFrom(v, Cat(what, " stages[", out.stages.size(), "]")));
        out.stages.push_back(stage);
        break;
      }
      case 6:
      case 7: {
        RETURN_IF_ERROR(r.Expect(wire, kLength, field == 6 ? "soak" : "stage_timeout"));
        ASSIGN_OR_RETURN(std::string_view v, r.Length());
        ASSIGN_OR_RETURN(int64_t ms, MillisFrom(v, what));
        (field == 6 ? out.soak_ms : out.stage_timeout_ms) = ms;
        break;
      }
      case 8: {
        RETURN_IF_ERROR(r.Expect(wire, kFixed64, "min_ack_share"));
        ASSIGN_OR_RETURN(out.min_ack_share, r.Fixed64Double());
        break;
      }
      case 9: {
        RETURN_IF_ERROR(r.Expect(wire, kVarint, "state"));
        ASSIGN_OR_RETURN(state, r.Varint());
        break;
      }
      case 10: {
        RETURN_IF_ERROR(r.Expect(wire, kVarint, "stage"));
        ASSIGN_OR_RETURN(uint64_t v, r.Varint());
        out.stage = static_cast<int32_t>(v);
        break;
      }
      case 11: {
        ASSIGN_OR_RETURN(out.pause_reason, StringFrom(r, wire, "pause_reason"));
        break;
      }
      case 12:
      case 13:
      case 14: {
        RETURN_IF_ERROR(r.Expect(wire, kLength, "a time"));
        ASSIGN_OR_RETURN(std::string_view v, r.Length());
        ASSIGN_OR_RETURN(int64_t ms, MillisFrom(v, what));
        (field == 12   ? out.created_at_ms
         : field == 13 ? out.updated_at_ms
                       : out.stage_started_at_ms) = ms;
        break;
      }
      default:  // rollout_id (cleared when stored) and the output-only fields
        RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  // ROLLOUT_STATE_RUNNING = 1 ... ROLLOUT_STATE_ROLLED_BACK = 4.
  if (state < 1 || state > 4) return Corrupt(what, Cat("has state ", state));
  out.state = static_cast<RolloutState>(state - 1);
  return out;
}

StatusOr<RolloutNodeRecord> DecodeV3RolloutNode(std::string_view node_id, std::string_view bytes) {
  const std::string what = Cat("rollout node '", node_id, "'");
  WireReader r(bytes, what);
  RolloutNodeRecord out;
  out.node_id = std::string(node_id);
  uint64_t state = 0;
  while (!r.done()) {
    ASSIGN_OR_RETURN(auto tag, r.Tag());
    const auto [field, wire] = tag;
    switch (field) {
      case 2: {
        RETURN_IF_ERROR(r.Expect(wire, kVarint, "in_rollout"));
        ASSIGN_OR_RETURN(uint64_t v, r.Varint());
        out.in_rollout = v != 0;
        break;
      }
      case 3: {
        ASSIGN_OR_RETURN(out.assigned_version, StringFrom(r, wire, "assigned_version"));
        break;
      }
      case 4: {
        ASSIGN_OR_RETURN(out.held_version, StringFrom(r, wire, "held_version"));
        break;
      }
      case 5: {
        RETURN_IF_ERROR(r.Expect(wire, kVarint, "state"));
        ASSIGN_OR_RETURN(state, r.Varint());
        break;
      }
      case 6: {
        ASSIGN_OR_RETURN(out.error, StringFrom(r, wire, "error"));
        break;
      }
      case 8: {
        RETURN_IF_ERROR(r.Expect(wire, kLength, "update_time"));
        ASSIGN_OR_RETURN(std::string_view v, r.Length());
        ASSIGN_OR_RETURN(out.updated_at_ms, MillisFrom(v, what));
        break;
      }
      default:  // node_id (the key holds it) and connected (never meaningful when stored)
        RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  // NODE_MAP_STATE_UNSPECIFIED = 0 ... NODE_MAP_STATE_FAILED = 3, as NodeMapState.
  if (state > 3) return Corrupt(what, Cat("has state ", state));
  out.state = static_cast<NodeMapState>(state);
  return out;
}

}  // namespace ripplekv::store
