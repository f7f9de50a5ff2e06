#include "worker/service/task_group.h"

#include <cstdint>

#include "base/strings.h"
#include "method/calibration_params_json.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace ripplekv::worker {

namespace {

using nlohmann::json;

// A task as rank 0 mirrors it; its parameters in their one JSON form
// (method/calibration_params_json.h), so every rank runs exactly rank 0's values.
json SpecToJson(const TaskSpec& s) {
  return {{"task", s.task_id},    {"job", s.job_id},
          {"hash", s.model_hash}, {"sample", s.sample},
          {"layer", s.layer},     {"params", json(method::CalibrationParamsToJson(s.params))}};
}

StatusOr<TaskSpec> SpecFromJson(const json& j) {
  TaskSpec s;
  s.task_id = j.at("task");
  s.job_id = j.at("job");
  s.model_hash = j.at("hash");
  s.sample = j.at("sample");
  s.layer = j.at("layer");
  StatusOr<method::CalibrationParams> params =
      method::CalibrationParamsFromJson(j.at("params"), "task group", "params");
  if (!params.ok()) return absl::DataLossError(params.status().message());
  s.params = *std::move(params);
  return s;
}

json SamplesToJson(const RunnerCommand& c) {
  json samples = json::array();
  for (const CalibrationSample& s : *c.samples) {
    samples.push_back(
        {{"index", s.index}, {"context", s.context}, {"probe", s.probe}, {"source", s.source}});
  }
  return {{"kind", "samples"},
          {"job", c.job_id},
          {"description", c.description},
          {"samples", std::move(samples)}};
}

}  // namespace

Status TaskGroup::Send(const std::string& bytes) {
  uint8_t header[8];  // the size, little-endian
  for (int i = 0; i < 8; ++i) header[i] = static_cast<uint8_t>(uint64_t{bytes.size()} >> (8 * i));
  RETURN_IF_ERROR(commands_.Broadcast(header, 0));
  std::string copy = bytes;
  return commands_.Broadcast(
      std::span<uint8_t>(reinterpret_cast<uint8_t*>(copy.data()), copy.size()), 0);
}

StatusOr<std::string> TaskGroup::Receive() {
  uint8_t header[8] = {};
  RETURN_IF_ERROR(commands_.Broadcast(header, 0));
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= uint64_t{header[i]} << (8 * i);
  std::string bytes(size, '\0');
  RETURN_IF_ERROR(commands_.Broadcast(
      std::span<uint8_t>(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size()), 0));
  return bytes;
}

Status TaskGroup::SendPendingDrops() {
  for (const std::string& job : pending_drops_) {
    RETURN_IF_ERROR(Send(json{{"kind", "drop"}, {"job", job}}.dump()));
  }
  pending_drops_.clear();
  return absl::OkStatus();
}

TaskRunner::Mirror TaskGroup::Leader() {
  return [this](const RunnerCommand& c) -> Status {
    std::lock_guard<std::mutex> lock(mu_);
    if (c.kind == RunnerCommand::Kind::kDrop) {
      pending_drops_.push_back(c.job_id);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(SendPendingDrops());
    if (c.kind == RunnerCommand::Kind::kSamples) return Send(SamplesToJson(c).dump());
    json run = SpecToJson(*c.spec);
    run["kind"] = "run";
    return Send(run.dump());
  };
}

Status TaskGroup::Dismiss() {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(SendPendingDrops());
  return Send(json{{"kind", "quit"}}.dump());
}

Status TaskGroup::Follow(TaskRunner& runner) {
  while (true) {
    ASSIGN_OR_RETURN(const std::string bytes, Receive());
    const json c = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (c.is_discarded() || !c.contains("kind")) {
      return absl::DataLossError("task group: a command from rank 0 is not JSON");
    }
    const std::string kind = c.at("kind");
    if (kind == "quit") return absl::OkStatus();
    if (kind == "drop") {
      runner.DropJob(c.at("job"));
    } else if (kind == "samples") {
      std::vector<CalibrationSample> samples;
      for (const json& s : c.at("samples")) {
        samples.push_back({.index = s.at("index"),
                           .context = s.at("context").get<std::vector<int32_t>>(),
                           .probe = s.at("probe").get<std::vector<int32_t>>(),
                           .source = s.at("source")});
      }
      runner.SetJobSamples(c.at("job"), std::move(samples), c.at("description"));
    } else if (kind == "run") {
      ASSIGN_OR_RETURN(const TaskSpec spec, SpecFromJson(c));
      if (auto outcome = runner.Run(spec); !outcome.ok()) {
        spdlog::warn("task {} (layer {}): {}", spec.task_id, spec.layer,
                     outcome.status().ToString());
      }
    } else {
      return absl::DataLossError(Cat("task group: unknown command '", kind, "'"));
    }
  }
}

}  // namespace ripplekv::worker
