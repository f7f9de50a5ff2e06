#include "store/types.h"

#include <array>
#include <utility>

namespace ripplekv::store {
namespace {

template <typename Enum, size_t N>
std::optional<Enum> Lookup(const std::array<std::pair<Enum, std::string_view>, N>& table,
                           std::string_view name) {
  for (const auto& [value, text] : table) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::string_view NameOf(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum value) {
  for (const auto& [v, text] : table) {
    if (v == value) return text;
  }
  return "unknown";
}

constexpr std::array<std::pair<DataFormat, std::string_view>, 3> kDataFormats = {{
    {DataFormat::kAuto, "auto"},
    {DataFormat::kJsonl, "jsonl"},
    {DataFormat::kText, "text"},
}};
constexpr std::array<std::pair<JobState, std::string_view>, 5> kJobStates = {{
    {JobState::kPending, "pending"},
    {JobState::kRunning, "running"},
    {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<TaskState, std::string_view>, 3> kTaskStates = {{
    {TaskState::kPending, "pending"},
    {TaskState::kLeased, "leased"},
    {TaskState::kDone, "done"},
}};
constexpr std::array<std::pair<RolloutState, std::string_view>, 4> kRolloutStates = {{
    {RolloutState::kRunning, "running"},
    {RolloutState::kPaused, "paused"},
    {RolloutState::kSucceeded, "succeeded"},
    {RolloutState::kRolledBack, "rolled_back"},
}};
constexpr std::array<std::pair<NodeMapState, std::string_view>, 4> kNodeMapStates = {{
    {NodeMapState::kUnspecified, "unspecified"},
    {NodeMapState::kPending, "pending"},
    {NodeMapState::kApplied, "applied"},
    {NodeMapState::kFailed, "failed"},
}};

}  // namespace

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

std::string_view DataFormatName(DataFormat format) { return NameOf(kDataFormats, format); }
std::string_view JobStateName(JobState state) { return NameOf(kJobStates, state); }
std::string_view TaskStateName(TaskState state) { return NameOf(kTaskStates, state); }
std::string_view RolloutStateName(RolloutState state) { return NameOf(kRolloutStates, state); }
std::string_view NodeMapStateName(NodeMapState state) { return NameOf(kNodeMapStates, state); }

std::optional<DataFormat> ParseDataFormat(std::string_view name) {
  return Lookup(kDataFormats, name);
}
std::optional<JobState> ParseJobState(std::string_view name) { return Lookup(kJobStates, name); }
std::optional<TaskState> ParseTaskState(std::string_view name) { return Lookup(kTaskStates, name); }
std::optional<RolloutState> ParseRolloutState(std::string_view name) {
  return Lookup(kRolloutStates, name);
}
std::optional<NodeMapState> ParseNodeMapState(std::string_view name) {
  return Lookup(kNodeMapStates, name);
}

}  // namespace ripplekv::store
