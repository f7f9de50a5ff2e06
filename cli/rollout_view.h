#pragma once
// The pure parts of `ripplekv map` and `ripplekv rollout` (RolloutService, docs/ROLLOUTS.md):
// parsing their flag values before any call, and turning the service's messages into the text the
// commands print. Every function here is a pure function of its arguments (no I/O, no clock), so
// the output is what a test sees. Thread-safe.
//
// Text output is stable for scripts: the status block is one "key value" pair per line with the
// key padded to a fixed width, tables have one header line and one row per item, columns
// separated by at least two spaces, empty values shown as "-".

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "google/protobuf/message.h"
#include "base/status.h"
#include "ripplekv/v1/rollout.pb.h"

namespace ripplekv::cli {

// ---------------------------------------------------------------------------------------------
// Flag values. Errors are InvalidArgument and start with the flag's name ("--stages: ...").

// A stage list: comma-separated sizes, each a node count ("3", >= 1, at most 2^31 - 1) or a
// percent of the model's connected nodes ("10%", "12.5%", in (0, 100]). Spaces around items are
// allowed. At most 16 stages; growth from one stage to the next is the scheduler's to check (a
// count and a percent cannot be compared here). "" is an error: leave the flag out for the
// scheduler's default stages.
[[nodiscard]] StatusOr<std::vector<v1::RolloutStage>> ParseStageList(std::string_view text,
                                                                     std::string_view flag);

// A duration: one or more <integer><unit> parts, units "ms", "s", "m", "h" ("500ms", "30s",
// "1m30s", "2h"); "0" alone is zero. No sign, no fractions; at most about 290 years (fits
// milliseconds in int64).
[[nodiscard]] StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                                std::string_view flag);

// A --selection-param value "KEY=VALUE" split at the first '='. KEY must not be empty; VALUE may
// be (and may contain '=').
[[nodiscard]] StatusOr<std::pair<std::string, std::string>> ParseKeyValue(std::string_view text,
                                                                          std::string_view flag);

// The formats `ripplekv map get --format` takes: "native", "kvpress", "trtllm" (the budget map as
// a serving node holds it, method/frozen_map.h) and "document" (the frozen document as stored).
[[nodiscard]] Status CheckMapFormat(std::string_view format, std::string_view flag);

// ---------------------------------------------------------------------------------------------
// Rendering.

// `status` with its code's name before the message ("NOT_FOUND: no map version ..."), code
// unchanged: how the map and rollout commands print what the scheduler returned.
[[nodiscard]] Status ServerError(const Status& status);

// `message` as JSON the way every remote command prints it: indented, proto field names.
std::string ProtoToJson(const google::protobuf::Message& message);

// The bytes of `map` in `format` (CheckMapFormat()): "document" is map.document unchanged; the
// others are RenderFrozenMap() of FrozenMapFromJson(map.document), byte for byte what a serving
// node's agent writes. Errors: InvalidArgument for an unknown format or kvpress on a map without
// a context length; DataLoss when the stored document does not parse (the message says which
// version).
[[nodiscard]] StatusOr<std::string> RenderMapVersion(const v1::BudgetMapVersion& map,
                                                     std::string_view format);

// "RUNNING", "PAUSED", "SUCCEEDED", "ROLLED_BACK"; "UNSPECIFIED" otherwise.
std::string RolloutStateName(v1::RolloutState state);
// "PENDING", "APPLIED", "FAILED"; "-" otherwise.
std::string NodeMapStateName(v1::NodeMapState state);
// Whether a rollout in `state` has ended (SUCCEEDED or ROLLED_BACK).
bool IsFinished(v1::RolloutState state);

// "500ms", "30s", "1m30s", "2h", "1h0m5s"; "0s" for zero or less. Milliseconds are shown only
// below one minute and only when not whole seconds ("1.5s").
std::string FormatDuration(std::chrono::milliseconds duration);

// A stage's size as given: "1 node", "3 nodes", "10%", "12.5%"; "-" when unset.
std::string StageSizeName(const v1::RolloutStage& stage);

// The status block of `rollout`, one line each (no newlines):
//   rollout    r12
//   model      <model hash>
//   map        <version> (previous <version> | previous none)
//   state      RUNNING
//   stage      2/4: 10% (3 nodes)
//   nodes      2 acknowledged, 1 pending, 0 failed (advances at 90%)
//   connected  24 nodes
//   soak       30s (12s left)          "30s" alone when not soaking now
//   timeout    5m per stage
//   reason     <pause reason>          only when pause_reason is set
std::vector<std::string> RolloutStatusLines(const v1::Rollout& rollout);

// One line for a log or a pipe, e.g. (wrapped here)
//   r12 RUNNING stage 2/4 (10%, 3 nodes): 2 acknowledged, 1 pending, 0 failed; 24 connected;
//   soak 12s left
// The stage's node count is left out when its size says it ("(1 node)"); "; reason: <reason>" is
// added when a pause reason is set.
std::string RolloutSummaryLine(const v1::Rollout& rollout);

// What `rollout status --watch` compares between polls to decide that something changed: the
// summary without the soak countdown (only whether the stage is soaking counts).
std::string RolloutChangeKey(const v1::Rollout& rollout);

// The per-node table: header, then one row per node in the order given. Columns: node,
// in rollout (yes/no), assigned, held, state, connected (yes/no), updated (UTC, seconds), error.
std::vector<std::string> RolloutNodeTable(const v1::Rollout& rollout);

// `ripplekv rollout list`: header, then one row per rollout. Columns: rollout, model (first 12
// hex digits), map, previous, state, stage (k/n), acknowledged (a/b of the stage's nodes),
// failed, created.
std::vector<std::string> RolloutListTable(const std::vector<v1::Rollout>& rollouts);

// `ripplekv map list`: header, then one row per version. Columns: version, sequence, profile
// version, selection method ("-" when none), total tokens, created.
std::vector<std::string> MapListTable(const std::vector<v1::BudgetMapVersion>& maps);

// `ripplekv map create --table`: the version's facts as key/value lines ("version", "sequence",
// "existing" yes/no, "profile" version, "selection" method and sorted KEY=VALUE params, "budget"
// parameters, "total" tokens over layers), then a table of layer and tokens.
std::vector<std::string> MapVersionLines(const v1::BudgetMapVersion& map, bool existing);

}  // namespace ripplekv::cli
