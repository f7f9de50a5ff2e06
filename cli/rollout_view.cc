#include "cli/rollout_view.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "base/strings.h"
#include "method/budget_format.h"
#include "method/frozen_map.h"
#include "method/profile.h"

namespace ripplekv::cli {

namespace {

// The scheduler's limit on stages per rollout (rollout.proto, CreateRolloutRequest.stages).
constexpr size_t kMaxStages = 16;

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Digits with at most one '.', at least one digit.
bool IsDecimal(absl::string_view s) {
  int dots = 0;
  int digits = 0;
  for (char c : s) {
    if (c == '.') {
      ++dots;
    } else if (c >= '0' && c <= '9') {
      ++digits;
    } else {
      return false;
    }
  }
  return dots <= 1 && digits > 0;
}

Status FlagError(std::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(flag), ": ", message));
}

std::string Nodes(int64_t n) { return absl::StrCat(n, n == 1 ? " node" : " nodes"); }

std::string OrDash(std::string_view s) { return s.empty() ? "-" : std::string(s); }

std::chrono::milliseconds ToMillis(const google::protobuf::Duration& d) {
  return std::chrono::milliseconds(d.seconds() * 1000 + d.nanos() / 1000000);
}

// Whole seconds, rounded up: a countdown shows "1s left" until it is over.
std::chrono::milliseconds CeilSeconds(std::chrono::milliseconds d) {
  return std::chrono::ceil<std::chrono::seconds>(d);
}

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return method::FormatIso8601Utc(
      std::chrono::system_clock::time_point(std::chrono::seconds(t.seconds())));
}

std::string NormalizationText(v1::Normalization n) {
  switch (n) {
    case v1::NORMALIZATION_RANK:
      return "rank";
    case v1::NORMALIZATION_LOG_MIN_MAX:
      return "log-minmax";
    default:
      return "minmax";
  }
}

// "2/4" for the rollout's current stage (1-based); "-" without stages.
std::string StagePosition(const v1::Rollout& r) {
  if (r.stages_size() == 0) return "-";
  return absl::StrCat(r.stage() + 1, "/", r.stages_size());
}

const v1::RolloutStage* CurrentStage(const v1::Rollout& r) {
  if (r.stage() < 0 || r.stage() >= r.stages_size()) return nullptr;
  return &r.stages(r.stage());
}

// Whether the stage's size already says how many nodes it covers (a count the nodes met), so the
// count is not repeated.
bool SizeIsCount(const v1::RolloutStage& stage, const v1::Rollout& r) {
  return stage.has_nodes() && stage.nodes() == r.stage_nodes();
}

std::string SummaryLine(const v1::Rollout& r, bool with_soak_left) {
  std::string line =
      absl::StrCat(r.rollout_id(), " ", RolloutStateName(r.state()), " stage ", StagePosition(r));
  if (const v1::RolloutStage* stage = CurrentStage(r)) {
    absl::StrAppend(&line, " (", StageSizeName(*stage));
    if (!SizeIsCount(*stage, r)) absl::StrAppend(&line, ", ", Nodes(r.stage_nodes()));
    absl::StrAppend(&line, ")");
  }
  absl::StrAppend(&line, ": ", r.acknowledged(), " acknowledged, ", r.pending(), " pending, ",
                  r.failed(), " failed; ", r.connected_nodes(), " connected");
  if (r.has_soak_left()) {
    absl::StrAppend(
        &line,
        with_soak_left
            ? absl::StrCat("; soak ", FormatDuration(CeilSeconds(ToMillis(r.soak_left()))), " left")
            : std::string("; soaking"));
  }
  if (!r.pause_reason().empty()) absl::StrAppend(&line, "; reason: ", r.pause_reason());
  return line;
}

// Rows as aligned text: every column as wide as its widest cell, two spaces between columns,
// columns in `right` right-aligned, the last column not padded (no trailing spaces).
std::vector<std::string> Table(const std::vector<std::vector<std::string>>& rows,
                               const std::vector<bool>& right) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::vector<std::string> lines;
  lines.reserve(rows.size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool last = c + 1 == row.size();
      if (c < right.size() && right[c]) {
        line += pad + row[c];
      } else {
        line += last ? row[c] : row[c] + pad;
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// Width of the keys of the key/value blocks: the longest key ("connected", "selection") and two
// spaces, so values start in one column.
constexpr size_t kKeyWidth = 11;

std::string KeyValue(std::string_view key, std::string_view value) {
  std::string line(key);
  line.resize(std::max<size_t>(line.size() + 1, kKeyWidth), ' ');
  line += value;
  return line;
}

}  // namespace

StatusOr<std::vector<v1::RolloutStage>> ParseStageList(std::string_view text_in,
                                                       std::string_view flag) {
  const absl::string_view text = Sv(text_in);
  if (absl::StripAsciiWhitespace(text).empty()) {
    return FlagError(flag, "empty stage list (e.g. 1,10%,50%,100%)");
  }
  std::vector<v1::RolloutStage> stages;
  int index = 0;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    ++index;
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) return FlagError(flag, absl::StrCat("stage ", index, " is empty"));
    v1::RolloutStage stage;
    if (item.back() == '%') {
      const absl::string_view number = item.substr(0, item.size() - 1);
      double percent = 0;
      if (!IsDecimal(number) || !absl::SimpleAtod(number, &percent)) {
        return FlagError(flag, absl::StrCat("stage ", index, ": \"", item,
                                            "\" is not a percent (e.g. 10%, 12.5%)"));
      }
      if (!(percent > 0.0 && percent <= 100.0)) {
        return FlagError(flag, absl::StrCat("stage ", index, ": ", item, " is outside (0%, 100%]"));
      }
      stage.set_percent(percent);
    } else {
      int32_t nodes = 0;
      if (!AllDigits(item) || !absl::SimpleAtoi(item, &nodes)) {
        return FlagError(flag, absl::StrCat("stage ", index, ": \"", item,
                                            "\" is not a node count or a percent (e.g. "
                                            "1,10%,50%,100%)"));
      }
      if (nodes < 1) {
        return FlagError(flag, absl::StrCat("stage ", index, ": a stage has at least 1 node"));
      }
      stage.set_nodes(nodes);
    }
    stages.push_back(std::move(stage));
  }
  if (stages.size() > kMaxStages) {
    return FlagError(flag, absl::StrCat(stages.size(), " stages, at most ", kMaxStages));
  }
  return stages;
}

StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text_in, std::string_view flag) {
  const absl::string_view text = Sv(text_in);
  const auto bad = [&] {
    return FlagError(flag,
                     absl::StrCat("\"", text, "\" is not a duration (e.g. 500ms, 30s, 5m, 1h30m)"));
  };
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.empty()) return bad();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    int64_t value = 0;
    if (i == start || !absl::SimpleAtoi(text.substr(start, i - start), &value)) return bad();
    int64_t unit_ms = 0;
    if (text.substr(i, 2) == "ms") {
      unit_ms = 1;
      i += 2;
    } else if (i < text.size() && text[i] == 's') {
      unit_ms = 1000;
      ++i;
    } else if (i < text.size() && text[i] == 'm') {
      unit_ms = 60 * 1000;
      ++i;
    } else if (i < text.size() && text[i] == 'h') {
      unit_ms = 3600 * 1000;
      ++i;
    } else {
      return bad();
    }
    if (value > (kMax - total) / unit_ms) {
      return FlagError(flag, absl::StrCat("\"", text, "\" is too long"));
    }
    total += value * unit_ms;
  }
  return std::chrono::milliseconds(total);
}

StatusOr<std::pair<std::string, std::string>> ParseKeyValue(std::string_view text_in,
                                                            std::string_view flag) {
  const absl::string_view text = Sv(text_in);
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return FlagError(flag, absl::StrCat("\"", text, "\" is not KEY=VALUE"));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

Status CheckMapFormat(std::string_view format, std::string_view flag) {
  if (format == "document" || method::ParseBudgetFormat(format).ok()) return absl::OkStatus();
  return FlagError(flag, absl::StrCat("unknown format \"", Sv(format),
                                      "\" (native, kvpress, trtllm or document)"));
}

Status ServerError(const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(),
                absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
}

std::string ProtoToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

StatusOr<std::string> RenderMapVersion(const v1::BudgetMapVersion& map, std::string_view format) {
  RETURN_IF_ERROR(CheckMapFormat(format, "--format"));
  if (format == "document") return map.document();
  StatusOr<method::FrozenMap> frozen = method::FrozenMapFromJson(map.document());
  if (!frozen.ok()) {
    return absl::DataLossError(
        absl::StrCat("map ", map.version(), ": stored document: ", frozen.status().message()));
  }
  ASSIGN_OR_RETURN(const method::BudgetFormat budget_format, method::ParseBudgetFormat(format));
  if (budget_format == method::BudgetFormat::kKvpress && !frozen->map.options.max_context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format kvpress: map ", map.version(),
        " has no context length (kvpress takes ratios of one; create the map with --context-len)"));
  }
  return method::RenderFrozenMap(*frozen, budget_format);
}

std::string RolloutStateName(v1::RolloutState state) {
  switch (state) {
    case v1::ROLLOUT_STATE_RUNNING:
      return "RUNNING";
    case v1::ROLLOUT_STATE_PAUSED:
      return "PAUSED";
    case v1::ROLLOUT_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case v1::ROLLOUT_STATE_ROLLED_BACK:
      return "ROLLED_BACK";
    default:
      return "UNSPECIFIED";
  }
}

std::string NodeMapStateName(v1::NodeMapState state) {
  switch (state) {
    case v1::NODE_MAP_STATE_PENDING:
      return "PENDING";
    case v1::NODE_MAP_STATE_APPLIED:
      return "APPLIED";
    case v1::NODE_MAP_STATE_FAILED:
      return "FAILED";
    default:
      return "-";
  }
}

bool IsFinished(v1::RolloutState state) {
  return state == v1::ROLLOUT_STATE_SUCCEEDED || state == v1::ROLLOUT_STATE_ROLLED_BACK;
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  if (ms <= 0) return "0s";
  if (ms < 1000) return absl::StrCat(ms, "ms");
  if (ms < 60 * 1000) {
    if (ms % 1000 == 0) return absl::StrCat(ms / 1000, "s");
    std::string fraction = absl::StrCat(1000 + ms % 1000).substr(1);  // 3 digits
    while (fraction.back() == '0') fraction.pop_back();
    return absl::StrCat(ms / 1000, ".", fraction, "s");
  }
  const int64_t total_s = (ms + 500) / 1000;
  const int64_t h = total_s / 3600;
  const int64_t m = (total_s / 60) % 60;
  const int64_t s = total_s % 60;
  std::string out;
  if (h > 0) absl::StrAppend(&out, h, "h");
  if (m > 0 || (h > 0 && s > 0)) absl::StrAppend(&out, m, "m");
  if (s > 0) absl::StrAppend(&out, s, "s");
  return out;
}

std::string StageSizeName(const v1::RolloutStage& stage) {
  switch (stage.size_case()) {
    case v1::RolloutStage::kNodes:
      return Nodes(stage.nodes());
    case v1::RolloutStage::kPercent:
      return absl::StrCat(stage.percent(), "%");
    default:
      return "-";
  }
}

std::vector<std::string> RolloutStatusLines(const v1::Rollout& r) {
  std::vector<std::string> lines;
  lines.push_back(KeyValue("rollout", r.rollout_id()));
  lines.push_back(KeyValue("model", r.model_hash()));
  lines.push_back(KeyValue(
      "map", absl::StrCat(OrDash(r.map_version()), " (previous ",
                          r.previous_version().empty() ? "none" : r.previous_version(), ")")));
  lines.push_back(KeyValue("state", RolloutStateName(r.state())));
  std::string stage = StagePosition(r);
  if (const v1::RolloutStage* s = CurrentStage(r)) {
    absl::StrAppend(&stage, ": ", StageSizeName(*s));
    if (!SizeIsCount(*s, r)) {
      absl::StrAppend(&stage, " (", Nodes(r.stage_nodes()), ")");
    }
  }
  lines.push_back(KeyValue("stage", stage));
  lines.push_back(KeyValue(
      "nodes", absl::StrCat(r.acknowledged(), " acknowledged, ", r.pending(), " pending, ",
                            r.failed(), " failed (advances at ", r.min_ack_share() * 100, "%)")));
  lines.push_back(KeyValue("connected", Nodes(r.connected_nodes())));
  std::string soak = FormatDuration(ToMillis(r.soak()));
  if (r.has_soak_left()) {
    absl::StrAppend(&soak, " (", FormatDuration(CeilSeconds(ToMillis(r.soak_left()))), " left)");
  }
  lines.push_back(KeyValue("soak", soak));
  lines.push_back(
      KeyValue("timeout", absl::StrCat(FormatDuration(ToMillis(r.stage_timeout())), " per stage")));
  if (!r.pause_reason().empty()) lines.push_back(KeyValue("reason", r.pause_reason()));
  return lines;
}

std::string RolloutSummaryLine(const v1::Rollout& rollout) { return SummaryLine(rollout, true); }

std::string RolloutChangeKey(const v1::Rollout& rollout) { return SummaryLine(rollout, false); }

std::vector<std::string> RolloutNodeTable(const v1::Rollout& rollout) {
  std::vector<std::vector<std::string>> rows = {
      {"node", "in rollout", "assigned", "held", "state", "connected", "updated", "error"}};
  for (const v1::RolloutNode& n : rollout.nodes()) {
    rows.push_back({n.node_id(), n.in_rollout() ? "yes" : "no", OrDash(n.assigned_version()),
                    OrDash(n.held_version()), NodeMapStateName(n.state()),
                    n.connected() ? "yes" : "no", FormatTimestamp(n.update_time()),
                    OrDash(n.error())});
  }
  return Table(rows, {});
}

std::vector<std::string> RolloutListTable(const std::vector<v1::Rollout>& rollouts) {
  std::vector<std::vector<std::string>> rows = {{"rollout", "model", "map", "previous", "state",
                                                 "stage", "acknowledged", "failed", "created"}};
  for (const v1::Rollout& r : rollouts) {
    rows.push_back({r.rollout_id(), OrDash(r.model_hash().substr(0, 12)), OrDash(r.map_version()),
                    OrDash(r.previous_version()), RolloutStateName(r.state()), StagePosition(r),
                    absl::StrCat(r.acknowledged(), "/", r.stage_nodes()), absl::StrCat(r.failed()),
                    FormatTimestamp(r.create_time())});
  }
  return Table(rows, {false, false, false, false, false, true, true, true, false});
}

std::vector<std::string> MapListTable(const std::vector<v1::BudgetMapVersion>& maps) {
  std::vector<std::vector<std::string>> rows = {
      {"version", "sequence", "profile version", "selection", "total tokens", "created"}};
  for (const v1::BudgetMapVersion& m : maps) {
    rows.push_back({m.version(), absl::StrCat(m.sequence()), absl::StrCat(m.profile_version()),
                    OrDash(m.selection().method()), absl::StrCat(m.total_tokens()),
                    FormatTimestamp(m.create_time())});
  }
  return Table(rows, {false, true, true, false, true, false});
}

std::vector<std::string> MapVersionLines(const v1::BudgetMapVersion& map, bool existing) {
  std::vector<std::string> lines;
  lines.push_back(KeyValue("version", map.version()));
  lines.push_back(KeyValue("sequence", absl::StrCat(map.sequence())));
  lines.push_back(KeyValue("existing", existing ? "yes" : "no"));
  lines.push_back(KeyValue("profile", absl::StrCat(map.profile_version())));
  // Params sorted by key, as the frozen document records them.
  std::vector<std::pair<std::string, std::string>> params(map.selection().params().begin(),
                                                          map.selection().params().end());
  std::sort(params.begin(), params.end());
  std::string selection = OrDash(map.selection().method());
  for (const auto& [key, value] : params) absl::StrAppend(&selection, " ", key, "=", value);
  lines.push_back(KeyValue("selection", selection));
  const v1::BudgetParams& p = map.params();
  std::string budget = p.has_total_tokens() ? absl::StrCat("total ", p.total_tokens())
                                            : absl::StrCat("average ", p.average_tokens());
  absl::StrAppend(&budget, ", ratio ", p.ratio(), ", min ", p.min_tokens(), ", max ",
                  p.has_max_tokens() ? absl::StrCat(p.max_tokens()) : std::string("none"), ", ",
                  NormalizationText(p.normalization()), ", context ",
                  p.has_context_len() ? absl::StrCat(p.context_len()) : std::string("none"));
  lines.push_back(KeyValue("budget", budget));
  lines.push_back(KeyValue(
      "total", absl::StrCat(map.total_tokens(), " tokens over ", map.tokens_size(), " layers")));
  std::vector<std::vector<std::string>> rows = {{"layer", "tokens"}};
  for (int l = 0; l < map.tokens_size(); ++l) {
    rows.push_back({absl::StrCat(l), absl::StrCat(map.tokens(l))});
  }
  for (std::string& line : Table(rows, {true, true})) lines.push_back(std::move(line));
  return lines;
}

}  // namespace ripplekv::cli
