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

}  // namespace

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

std::string_view DataFormatName(DataFormat format) { return NameOf(kDataFormats, format); }
std::string_view JobStateName(JobState state) { return NameOf(kJobStates, state); }
std::string_view TaskStateName(TaskState state) { return NameOf(kTaskStates, state); }

std::optional<DataFormat> ParseDataFormat(std::string_view name) {
  return Lookup(kDataFormats, name);
}
std::optional<JobState> ParseJobState(std::string_view name) { return Lookup(kJobStates, name); }
std::optional<TaskState> ParseTaskState(std::string_view name) { return Lookup(kTaskStates, name); }

}  // namespace ripplekv::store
