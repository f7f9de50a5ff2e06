#include "store/legacy/decode_v3_rollouts.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format.h>

#include <climits>
#include <string>
#include <vector>

#include "base/strings.h"
#include "store/legacy/v3_rollout.pb.h"

namespace ripplekv::store {
namespace {

namespace pb = ::google::protobuf;
namespace v3 = ::ripplekv::store::legacy::v3;

Status Corrupt(std::string_view what, std::string_view why) {
  return absl::DataLossError(Cat("version-3 ", what, " ", why));
}

// `message` parsed from `bytes`; DataLoss when protobuf refuses them.
Status Parse(std::string_view bytes, std::string_view what, pb::Message& message) {
  if (bytes.size() > INT_MAX ||
      !message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Corrupt(what, Cat("is truncated or malformed (not a version-3 ",
                             message.GetDescriptor()->name(), ")"));
  }
  return absl::OkStatus();
}

// The wire type protobuf read an unknown field with.
int WireTypeOf(const pb::UnknownField& field) {
  using Lite = pb::internal::WireFormatLite;
  switch (field.type()) {
    case pb::UnknownField::TYPE_VARINT:
      return Lite::WIRETYPE_VARINT;
    case pb::UnknownField::TYPE_FIXED32:
      return Lite::WIRETYPE_FIXED32;
    case pb::UnknownField::TYPE_FIXED64:
      return Lite::WIRETYPE_FIXED64;
    case pb::UnknownField::TYPE_LENGTH_DELIMITED:
      return Lite::WIRETYPE_LENGTH_DELIMITED;
    case pb::UnknownField::TYPE_GROUP:
      break;
  }
  return Lite::WIRETYPE_START_GROUP;
}

// Protobuf keeps a field that came with another wire type than its definition's as an unknown
// field. Version 3 never wrote one, so for a field this schema knows it is damage: DataLoss naming
// the field (`path` names `message` within the record, "" at the top). Recurses into every set
// message field.
Status CheckWireTypes(const pb::Message& message, std::string_view what, const std::string& path) {
  const pb::Reflection& reflection = *message.GetReflection();
  const pb::UnknownFieldSet& unknown = reflection.GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const pb::UnknownField& field = unknown.field(i);
    const pb::FieldDescriptor* known = message.GetDescriptor()->FindFieldByNumber(field.number());
    if (known == nullptr) continue;
    return Corrupt(
        what, Cat("field '", path, known->name(), "' has wire type ", WireTypeOf(field), ", not ",
                  static_cast<int>(pb::internal::WireFormat::WireTypeForField(known))));
  }
  std::vector<const pb::FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!field->is_repeated()) {
      RETURN_IF_ERROR(CheckWireTypes(reflection.GetMessage(message, field), what,
                                     Cat(path, field->name(), ".")));
      continue;
    }
    for (int i = 0; i < reflection.FieldSize(message, field); ++i) {
      RETURN_IF_ERROR(CheckWireTypes(reflection.GetRepeatedMessage(message, field, i), what,
                                     Cat(path, field->name(), "[", i, "].")));
    }
  }
  return absl::OkStatus();
}

// A google.protobuf.Duration or Timestamp (same fields) as milliseconds.
template <typename SecondsAndNanos>
StatusOr<int64_t> Millis(const SecondsAndNanos& time, std::string_view what) {
  constexpr int64_t kMaxSeconds = INT64_MAX / 1000 - 1;
  if (time.seconds() > kMaxSeconds || time.seconds() < -kMaxSeconds)
    return Corrupt(what, "is out of range");
  return time.seconds() * 1000 + time.nanos() / 1'000'000;
}

RolloutStage StageFrom(const v3::RolloutStage& stage) {
  switch (stage.size_case()) {
    case v3::RolloutStage::kNodes:
      return {.nodes = stage.nodes()};
    case v3::RolloutStage::kPercent:
      return {.percent = stage.percent()};
    case v3::RolloutStage::SIZE_NOT_SET:
      break;
  }
  return {};
}

}  // namespace

StatusOr<RolloutRecord> DecodeV3Rollout(uint64_t id, std::string_view bytes) {
  const std::string what = Cat("rollout ", id);
  v3::Rollout in;
  RETURN_IF_ERROR(Parse(bytes, what, in));
  RETURN_IF_ERROR(CheckWireTypes(in, what, ""));
  // ROLLOUT_STATE_RUNNING = 1 ... ROLLOUT_STATE_ROLLED_BACK = 4.
  if (in.state() < v3::ROLLOUT_STATE_RUNNING || in.state() > v3::ROLLOUT_STATE_ROLLED_BACK)
    return Corrupt(what, Cat("has state ", static_cast<int>(in.state())));
  RolloutRecord out;
  out.id = id;
  out.model_hash = in.model_hash();
  out.map_version = in.map_version();
  out.previous_version = in.previous_version();
  for (const v3::RolloutStage& stage : in.stages()) out.stages.push_back(StageFrom(stage));
  ASSIGN_OR_RETURN(out.soak_ms, Millis(in.soak(), what));
  ASSIGN_OR_RETURN(out.stage_timeout_ms, Millis(in.stage_timeout(), what));
  out.min_ack_share = in.min_ack_share();
  out.state = static_cast<RolloutState>(in.state() - v3::ROLLOUT_STATE_RUNNING);
  out.stage = in.stage();
  out.pause_reason = in.pause_reason();
  ASSIGN_OR_RETURN(out.created_at_ms, Millis(in.create_time(), what));
  ASSIGN_OR_RETURN(out.updated_at_ms, Millis(in.update_time(), what));
  ASSIGN_OR_RETURN(out.stage_started_at_ms, Millis(in.stage_start_time(), what));
  return out;
}

StatusOr<RolloutNodeRecord> DecodeV3RolloutNode(std::string_view node_id, std::string_view bytes) {
  const std::string what = Cat("rollout node '", node_id, "'");
  v3::RolloutNode in;
  RETURN_IF_ERROR(Parse(bytes, what, in));
  RETURN_IF_ERROR(CheckWireTypes(in, what, ""));
  // NODE_MAP_STATE_UNSPECIFIED = 0 ... NODE_MAP_STATE_FAILED = 3, as NodeMapState.
  if (in.state() < v3::NODE_MAP_STATE_UNSPECIFIED || in.state() > v3::NODE_MAP_STATE_FAILED)
    return Corrupt(what, Cat("has state ", static_cast<int>(in.state())));
  RolloutNodeRecord out;
  out.node_id = std::string(node_id);
  out.in_rollout = in.in_rollout();
  out.assigned_version = in.assigned_version();
  out.held_version = in.held_version();
  out.state = static_cast<NodeMapState>(in.state());
  out.error = in.error();
  ASSIGN_OR_RETURN(out.updated_at_ms, Millis(in.update_time(), what));
  return out;
}

}  // namespace ripplekv::store
