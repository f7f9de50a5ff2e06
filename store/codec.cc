#include "store/codec.h"

#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>

#include "base/sha256.h"
#include "base/strings.h"
#include "method/calibration_params_json.h"
#include "nlohmann/json.hpp"

namespace ripplekv::store {
namespace {

using Json = nlohmann::json;

// Offset of the first byte that is not part of a well-formed UTF-8 sequence, or nullopt.
std::optional<size_t> FirstBadUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = b & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

// Serializes a JSON value whose strings were checked with CheckUtf8 (dump() throws otherwise;
// the catch is a backstop at the library edge).
StatusOr<std::string> Dump(const Json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(Cat("cannot encode ", what, ": ", e.what()));
  }
}

Status Corrupt(std::string_view path, std::string_view why) {
  return absl::DataLossError(Cat("field '", path, "' ", why));
}

std::string Join(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : Cat(prefix, ".", name);
}

// Strict reader of one stored JSON object; `prefix` is the object's path for messages.
class Reader {
 public:
  Reader(const Json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  // DataLoss for a member not in `allowed`.
  Status OnlyFields(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [name, value] : obj_.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || name == a;
      if (!known) return Corrupt(Join(prefix_, name), "is not a known field");
    }
    return absl::OkStatus();
  }

  bool Has(std::string_view name) const { return obj_.contains(std::string(name)); }
  const std::string& Prefix() const { return prefix_; }

  StatusOr<const Json*> Member(std::string_view name) const {
    auto it = obj_.find(std::string(name));
    if (it == obj_.end()) return Corrupt(Join(prefix_, name), "is missing");
    return &*it;
  }

  StatusOr<uint64_t> U64(std::string_view name, uint64_t max = UINT64_MAX) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
      return Corrupt(Join(prefix_, name), Cat("is not a non-negative integer: ", v->dump()));
    }
    const uint64_t x = v->get<uint64_t>();
    if (x > max) return Corrupt(Join(prefix_, name), Cat("is ", x, ", above ", max));
    return x;
  }

  StatusOr<uint32_t> U32(std::string_view name) const {
    ASSIGN_OR_RETURN(uint64_t x, U64(name, UINT32_MAX));
    return static_cast<uint32_t>(x);
  }

  StatusOr<int64_t> I64(std::string_view name, int64_t min = INT64_MIN,
                        int64_t max = INT64_MAX) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return Corrupt(Join(prefix_, name), Cat("is not a 64-bit integer: ", v->dump()));
    }
    const int64_t x = v->get<int64_t>();
    if (x < min || x > max) {
      return Corrupt(Join(prefix_, name), Cat("is ", x, ", outside [", min, ", ", max, "]"));
    }
    return x;
  }

  StatusOr<double> Double(std::string_view name) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_number()) return Corrupt(Join(prefix_, name), Cat("is not a number: ", v->dump()));
    return v->get<double>();
  }

  StatusOr<bool> Bool(std::string_view name) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_boolean()) return Corrupt(Join(prefix_, name), "is not a boolean");
    return v->get<bool>();
  }

  StatusOr<std::string> String(std::string_view name) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_string()) return Corrupt(Join(prefix_, name), "is not a string");
    return v->get<std::string>();
  }

  StatusOr<Reader> Object(std::string_view name) const {
    ASSIGN_OR_RETURN(const Json* v, Member(name));
    if (!v->is_object()) return Corrupt(Join(prefix_, name), "is not an object");
    return Reader(*v, Join(prefix_, name));
  }

  template <typename Enum>
  StatusOr<Enum> Enumerated(std::string_view name,
                            std::optional<Enum> (*parse)(std::string_view)) const {
    ASSIGN_OR_RETURN(std::string text, String(name));
    std::optional<Enum> value = parse(text);
    if (!value) return Corrupt(Join(prefix_, name), Cat("has an unknown value '", text, "'"));
    return *value;
  }

 private:
  const Json& obj_;
  std::string prefix_;
};

// Parses a stored value: a JSON object whose "v" is kValueFormatVersion.
StatusOr<Json> ParseValue(std::string_view value) {
  Json j = Json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError("value is not valid JSON");
  if (!j.is_object()) return absl::DataLossError("value is not a JSON object");
  ASSIGN_OR_RETURN(uint64_t version, Reader(j, "").U64("v"));
  if (version != static_cast<uint64_t>(kValueFormatVersion)) {
    return absl::DataLossError(
        Cat("value format version ", version, "; this build reads ", kValueFormatVersion));
  }
  return j;
}

// JSON text holds only UTF-8 strings and finite numbers.
Status CheckSpecEncodable(const JobSpec& spec) {
  if (!std::isfinite(spec.params.alpha)) {
    return absl::InvalidArgumentError("spec.params.alpha is not finite");
  }
  if (!(spec.verify_fraction >= 0 && spec.verify_fraction <= 1)) {
    return absl::InvalidArgumentError("spec.verify_fraction is not in [0, 1]");
  }
  RETURN_IF_ERROR(CheckUtf8(spec.model_path, "spec.model_path"));
  RETURN_IF_ERROR(CheckUtf8(spec.model_hash, "spec.model_hash"));
  RETURN_IF_ERROR(CheckUtf8(spec.data_path, "spec.data_path"));
  RETURN_IF_ERROR(CheckUtf8(spec.data_builtin, "spec.data_builtin"));
  return CheckUtf8(spec.idempotency_key, "spec.idempotency_key");
}

Json SpecToJson(const JobSpec& spec) {
  Json j{
      {"model_path", spec.model_path},
      {"model_hash", spec.model_hash},
      {"data_path", spec.data_path},
      {"data_format", DataFormatName(spec.data_format)},
      {"data_strict", spec.data_strict},
      {"data_builtin", spec.data_builtin},
      // The one JSON form of the method's parameters (method/calibration_params_json.h); its
      // optional members are written only when used, so such a job encodes as before they
      // existed (and older records decode with the defaults).
      {"params", Json(method::CalibrationParamsToJson(spec.params))},
      {"priority", spec.priority},
      {"idempotency_key", spec.idempotency_key},
  };
  // Written only when it differs from its default, as the optional parameters.
  if (spec.verify_fraction != 0) j["verify_fraction"] = spec.verify_fraction;
  return j;
}

StatusOr<JobSpec> SpecFromJson(const Reader& r) {
  RETURN_IF_ERROR(
      r.OnlyFields({"model_path", "model_hash", "data_path", "data_format", "data_strict",
                    "data_builtin", "params", "priority", "idempotency_key", "verify_fraction"}));
  JobSpec spec;
  ASSIGN_OR_RETURN(spec.model_path, r.String("model_path"));
  ASSIGN_OR_RETURN(spec.model_hash, r.String("model_hash"));
  ASSIGN_OR_RETURN(spec.data_path, r.String("data_path"));
  // The data_* fields came after the first stored records; absent means the defaults.
  if (r.Has("data_format")) {
    ASSIGN_OR_RETURN(spec.data_format, r.Enumerated<DataFormat>("data_format", &ParseDataFormat));
  }
  if (r.Has("data_strict")) {
    ASSIGN_OR_RETURN(spec.data_strict, r.Bool("data_strict"));
  }
  if (r.Has("data_builtin")) {
    ASSIGN_OR_RETURN(spec.data_builtin, r.String("data_builtin"));
  }
  ASSIGN_OR_RETURN(int64_t priority, r.I64("priority", INT32_MIN, INT32_MAX));
  spec.priority = static_cast<int32_t>(priority);
  ASSIGN_OR_RETURN(spec.idempotency_key, r.String("idempotency_key"));
  if (r.Has("verify_fraction")) {  // absent: 0, no verification (every record from before it)
    ASSIGN_OR_RETURN(spec.verify_fraction, r.Double("verify_fraction"));
    if (!(spec.verify_fraction >= 0 && spec.verify_fraction <= 1)) {
      return absl::InvalidArgumentError("verify_fraction: not in [0, 1]");
    }
  }

  // Read as stored (types only): the scheduler checked the rules when it accepted the job.
  ASSIGN_OR_RETURN(const Json* params, r.Member("params"));
  StatusOr<method::CalibrationParams> p =
      method::CalibrationParamsFromJson(*params, "stored job", Join(r.Prefix(), "params"));
  if (!p.ok()) return absl::DataLossError(p.status().message());
  spec.params = *std::move(p);
  return spec;
}

// The fields every budget map record has had since schema version 1.
StatusOr<BudgetMapRecord> BudgetMapFields(const VersionKeyParts& key, const Reader& r) {
  BudgetMapRecord m;
  m.model_hash = key.model_hash;
  m.version = key.version;
  ASSIGN_OR_RETURN(m.profile_version, r.U32("profile_version"));
  ASSIGN_OR_RETURN(m.budget_json, r.String("budget_json"));
  ASSIGN_OR_RETURN(m.created_at_ms, r.I64("created_at_ms"));
  return m;
}

}  // namespace

Status CheckUtf8(std::string_view text, std::string_view field) {
  if (auto bad = FirstBadUtf8(text)) {
    return absl::InvalidArgumentError(Cat(field, " is not valid UTF-8 (byte offset ", *bad, ")"));
  }
  return absl::OkStatus();
}

Status CheckJsonDocument(std::string_view text, std::string_view field) {
  try {
    const Json parsed = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(Cat(field, " is not a JSON document: ", e.what()));
  }
  return absl::OkStatus();
}

StatusOr<std::string> EncodeJob(const Job& job) {
  RETURN_IF_ERROR(CheckSpecEncodable(job.spec));
  RETURN_IF_ERROR(CheckUtf8(job.error, "error"));
  RETURN_IF_ERROR(CheckUtf8(job.data_description, "data_description"));
  Json j = {
      {"v", kValueFormatVersion},
      {"spec", SpecToJson(job.spec)},
      {"state", JobStateName(job.state)},
      {"created_at_ms", job.created_at_ms},
      {"updated_at_ms", job.updated_at_ms},
      {"tasks_total", job.tasks_total},
      {"tasks_done", job.tasks_done},
      {"results_stored", job.results_stored},
      {"duplicate_results", job.duplicate_results},
      {"conflicting_results", job.conflicting_results},
      {"profile_version", job.profile_version},
      {"error", job.error},
      {"data_description", job.data_description},
  };
  if (job.purged_at_ms != 0) j["purged_at_ms"] = job.purged_at_ms;  // absent until purged
  if (job.data_inline_bytes != 0) j["data_inline_bytes"] = job.data_inline_bytes;
  // Only once rounds were added (Store::ExtendJob); absent means spec.params.samples.
  if (job.samples_planned != job.spec.params.samples) j["samples_planned"] = job.samples_planned;
  return Dump(j, "job");
}

StatusOr<Job> DecodeJob(JobId id, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields(
      {"v", "spec", "state", "created_at_ms", "updated_at_ms", "tasks_total", "tasks_done",
       "results_stored", "duplicate_results", "conflicting_results", "profile_version", "error",
       "data_description", "purged_at_ms", "data_inline_bytes", "samples_planned"}));
  Job job;
  job.id = id;
  ASSIGN_OR_RETURN(Reader spec, r.Object("spec"));
  ASSIGN_OR_RETURN(job.spec, SpecFromJson(spec));
  ASSIGN_OR_RETURN(job.state, r.Enumerated<JobState>("state", &ParseJobState));
  ASSIGN_OR_RETURN(job.created_at_ms, r.I64("created_at_ms"));
  ASSIGN_OR_RETURN(job.updated_at_ms, r.I64("updated_at_ms"));
  ASSIGN_OR_RETURN(job.tasks_total, r.U64("tasks_total"));
  ASSIGN_OR_RETURN(job.tasks_done, r.U64("tasks_done"));
  ASSIGN_OR_RETURN(job.results_stored, r.U64("results_stored"));
  ASSIGN_OR_RETURN(job.duplicate_results, r.U64("duplicate_results"));
  ASSIGN_OR_RETURN(job.conflicting_results, r.U64("conflicting_results"));
  ASSIGN_OR_RETURN(job.profile_version, r.U32("profile_version"));
  ASSIGN_OR_RETURN(job.error, r.String("error"));
  if (r.Has("data_description")) {  // absent in records written before the field existed
    ASSIGN_OR_RETURN(job.data_description, r.String("data_description"));
  }
  if (r.Has("purged_at_ms")) {  // only in records of purged jobs
    ASSIGN_OR_RETURN(job.purged_at_ms, r.I64("purged_at_ms"));
  }
  if (r.Has("data_inline_bytes")) {  // only in records of jobs with inline data
    ASSIGN_OR_RETURN(job.data_inline_bytes, r.U64("data_inline_bytes"));
  }
  job.samples_planned = job.spec.params.samples;
  if (r.Has("samples_planned")) {  // only in records of jobs extended by rounds
    ASSIGN_OR_RETURN(job.samples_planned, r.U32("samples_planned"));
  }
  if (job.tasks_done > job.tasks_total) {
    return Corrupt("tasks_done",
                   Cat("is ", job.tasks_done, ", above tasks_total ", job.tasks_total));
  }
  return job;
}

StatusOr<std::string> EncodeJobData(std::string_view data_inline) {
  RETURN_IF_ERROR(CheckUtf8(data_inline, "spec.data_inline"));
  return Dump(Json{{"v", kValueFormatVersion}, {"data_inline", data_inline}}, "job data");
}

StatusOr<std::string> DecodeJobData(std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "data_inline"}));
  return r.String("data_inline");
}

StatusOr<std::string> EncodeTask(const Task& task) {
  RETURN_IF_ERROR(CheckUtf8(task.lease_owner, "lease_owner"));
  RETURN_IF_ERROR(CheckUtf8(task.completed_by, "completed_by"));
  RETURN_IF_ERROR(CheckUtf8(task.completed_by_version, "completed_by_version"));
  Json j = {
      {"v", kValueFormatVersion},        {"state", TaskStateName(task.state)},
      {"lease_owner", task.lease_owner}, {"lease_deadline_ms", task.lease_deadline_ms},
      {"attempts", task.attempts},
  };
  // Only when recorded: a task without them encodes as before they existed.
  if (!task.completed_by.empty()) j["completed_by"] = task.completed_by;
  if (!task.completed_by_version.empty()) j["completed_by_version"] = task.completed_by_version;
  return Dump(j, "task");
}

StatusOr<Task> DecodeTask(const TaskKey& key, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "state", "lease_owner", "lease_deadline_ms", "attempts",
                                "completed_by", "completed_by_version"}));
  Task task;
  task.key = key;
  ASSIGN_OR_RETURN(task.state, r.Enumerated<TaskState>("state", &ParseTaskState));
  ASSIGN_OR_RETURN(task.lease_owner, r.String("lease_owner"));
  ASSIGN_OR_RETURN(task.lease_deadline_ms, r.I64("lease_deadline_ms"));
  ASSIGN_OR_RETURN(task.attempts, r.U32("attempts"));
  if (r.Has("completed_by")) {
    ASSIGN_OR_RETURN(task.completed_by, r.String("completed_by"));
  }
  if (r.Has("completed_by_version")) {
    ASSIGN_OR_RETURN(task.completed_by_version, r.String("completed_by_version"));
  }
  if ((task.state == TaskState::kLeased) == task.lease_owner.empty()) {
    return Corrupt("lease_owner", Cat("is '", task.lease_owner, "' for a task in state ",
                                      TaskStateName(task.state)));
  }
  return task;
}

std::string EncodeResultValue(double kl) {
  // A finite double never makes dump() throw.
  return Json{{"v", kValueFormatVersion}, {"kl", kl}}.dump();
}

StatusOr<double> DecodeResultValue(std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "kl"}));
  ASSIGN_OR_RETURN(double kl, r.Double("kl"));
  if (!std::isfinite(kl)) return Corrupt("kl", "is not finite");
  return kl;
}

StatusOr<std::string> EncodeProfile(const ProfileVersion& profile) {
  RETURN_IF_ERROR(CheckUtf8(profile.profile_json, "profile_json"));
  const Json j = {
      {"v", kValueFormatVersion},
      {"profile_json", profile.profile_json},
      {"job", profile.job},
      {"created_at_ms", profile.created_at_ms},
  };
  return Dump(j, "profile");
}

StatusOr<ProfileVersion> DecodeProfile(const VersionKeyParts& key, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "profile_json", "job", "created_at_ms"}));
  ProfileVersion p;
  p.model_hash = key.model_hash;
  p.version = key.version;
  ASSIGN_OR_RETURN(p.profile_json, r.String("profile_json"));
  ASSIGN_OR_RETURN(p.job, r.U64("job"));
  ASSIGN_OR_RETURN(p.created_at_ms, r.I64("created_at_ms"));
  return p;
}

StatusOr<std::string> EncodeBudgetMap(const BudgetMapRecord& map) {
  RETURN_IF_ERROR(CheckUtf8(map.budget_json, "budget_json"));
  const Json j = {
      {"v", kValueFormatVersion},           {"profile_version", map.profile_version},
      {"budget_json", map.budget_json},     {"digest", map.digest},
      {"created_at_ms", map.created_at_ms},
  };
  return Dump(j, "budget map");
}

StatusOr<BudgetMapRecord> DecodeBudgetMap(const VersionKeyParts& key, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "profile_version", "budget_json", "digest", "created_at_ms"}));
  ASSIGN_OR_RETURN(BudgetMapRecord m, BudgetMapFields(key, r));
  ASSIGN_OR_RETURN(m.digest, r.String("digest"));
  const std::string computed = BudgetMapDigest(m.budget_json);
  if (m.digest != computed) {
    return Corrupt("digest", Cat("is '", m.digest, "'; budget_json's is '", computed, "'"));
  }
  return m;
}

StatusOr<BudgetMapRecord> DecodeV2BudgetMap(const VersionKeyParts& key, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields({"v", "profile_version", "budget_json", "created_at_ms"}));
  ASSIGN_OR_RETURN(BudgetMapRecord m, BudgetMapFields(key, r));
  m.digest = BudgetMapDigest(m.budget_json);
  return m;
}

std::string BudgetMapDigest(std::string_view budget_json) {
  // A broken OpenSSL gives every map the all-zero digest, which PutBudgetMap refuses as a
  // collision: never a wrong match.
  return Sha256Hex(budget_json).substr(0, kMapDigestChars);
}

namespace {

// The checks every stored rollout passes, as "<field> ..." (the encoder's InvalidArgument, the
// decoder's DataLoss).
std::optional<std::string> RolloutProblem(const RolloutRecord& r) {
  if (r.stages.empty()) return "stages is empty";
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const RolloutStage& s = r.stages[i];
    if (s.nodes.has_value() == s.percent.has_value()) {
      return Cat("stages[", i, "] has ", s.nodes ? "both nodes and percent" : "no size");
    }
    if (s.nodes && *s.nodes < 1) return Cat("stages[", i, "].nodes is ", *s.nodes, ", below 1");
    if (s.percent && !(*s.percent > 0 && *s.percent <= 100)) {
      return Cat("stages[", i, "].percent is ", *s.percent, ", outside (0, 100]");
    }
  }
  if (r.stage < 0 || static_cast<size_t>(r.stage) >= r.stages.size()) {
    return Cat("stage is ", r.stage, ", not an index into ", r.stages.size(), " stages");
  }
  if (r.soak_ms < 0) return Cat("soak_ms is ", r.soak_ms, ", below 0");
  if (r.stage_timeout_ms <= 0) return Cat("stage_timeout_ms is ", r.stage_timeout_ms, ", not > 0");
  if (!(r.min_ack_share > 0 && r.min_ack_share <= 1)) {
    return Cat("min_ack_share is ", r.min_ack_share, ", outside (0, 1]");
  }
  return std::nullopt;
}

StatusOr<RolloutStage> StageFromJson(const Json& j, const std::string& path) {
  if (!j.is_object()) return Corrupt(path, "is not an object");
  const Reader r(j, path);
  RETURN_IF_ERROR(r.OnlyFields({"nodes", "percent"}));
  RolloutStage stage;
  if (r.Has("nodes")) {
    ASSIGN_OR_RETURN(int64_t nodes, r.I64("nodes", 1, INT32_MAX));
    stage.nodes = static_cast<int32_t>(nodes);
  }
  if (r.Has("percent")) {
    ASSIGN_OR_RETURN(stage.percent, r.Double("percent"));
  }
  return stage;
}

}  // namespace

StatusOr<std::string> EncodeRollout(const RolloutRecord& rollout) {
  if (std::optional<std::string> problem = RolloutProblem(rollout)) {
    return absl::InvalidArgumentError(Cat("rollout ", rollout.id, ": ", *problem));
  }
  RETURN_IF_ERROR(CheckUtf8(rollout.model_hash, "model_hash"));
  RETURN_IF_ERROR(CheckUtf8(rollout.map_version, "map_version"));
  RETURN_IF_ERROR(CheckUtf8(rollout.previous_version, "previous_version"));
  RETURN_IF_ERROR(CheckUtf8(rollout.pause_reason, "pause_reason"));
  Json stages = Json::array();
  for (const RolloutStage& s : rollout.stages) {
    stages.push_back(s.nodes ? Json{{"nodes", *s.nodes}} : Json{{"percent", *s.percent}});
  }
  const Json j = {
      {"v", kValueFormatVersion},
      {"model_hash", rollout.model_hash},
      {"map_version", rollout.map_version},
      {"previous_version", rollout.previous_version},
      {"stages", std::move(stages)},
      {"soak_ms", rollout.soak_ms},
      {"stage_timeout_ms", rollout.stage_timeout_ms},
      {"min_ack_share", rollout.min_ack_share},
      {"state", RolloutStateName(rollout.state)},
      {"stage", rollout.stage},
      {"pause_reason", rollout.pause_reason},
      {"created_at_ms", rollout.created_at_ms},
      {"updated_at_ms", rollout.updated_at_ms},
      {"stage_started_at_ms", rollout.stage_started_at_ms},
  };
  return Dump(j, "rollout");
}

StatusOr<RolloutRecord> DecodeRollout(uint64_t id, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(
      r.OnlyFields({"v", "model_hash", "map_version", "previous_version", "stages", "soak_ms",
                    "stage_timeout_ms", "min_ack_share", "state", "stage", "pause_reason",
                    "created_at_ms", "updated_at_ms", "stage_started_at_ms"}));
  RolloutRecord out;
  out.id = id;
  ASSIGN_OR_RETURN(out.model_hash, r.String("model_hash"));
  ASSIGN_OR_RETURN(out.map_version, r.String("map_version"));
  ASSIGN_OR_RETURN(out.previous_version, r.String("previous_version"));
  ASSIGN_OR_RETURN(const Json* stages, r.Member("stages"));
  if (!stages->is_array()) return Corrupt("stages", "is not an array");
  for (size_t i = 0; i < stages->size(); ++i) {
    ASSIGN_OR_RETURN(RolloutStage stage, StageFromJson((*stages)[i], Cat("stages[", i, "]")));
    out.stages.push_back(stage);
  }
  ASSIGN_OR_RETURN(out.soak_ms, r.I64("soak_ms"));
  ASSIGN_OR_RETURN(out.stage_timeout_ms, r.I64("stage_timeout_ms"));
  ASSIGN_OR_RETURN(out.min_ack_share, r.Double("min_ack_share"));
  ASSIGN_OR_RETURN(out.state, r.Enumerated<RolloutState>("state", &ParseRolloutState));
  ASSIGN_OR_RETURN(int64_t stage, r.I64("stage", 0, INT32_MAX));
  out.stage = static_cast<int32_t>(stage);
  ASSIGN_OR_RETURN(out.pause_reason, r.String("pause_reason"));
  ASSIGN_OR_RETURN(out.created_at_ms, r.I64("created_at_ms"));
  ASSIGN_OR_RETURN(out.updated_at_ms, r.I64("updated_at_ms"));
  ASSIGN_OR_RETURN(out.stage_started_at_ms, r.I64("stage_started_at_ms"));
  if (std::optional<std::string> problem = RolloutProblem(out)) {
    return absl::DataLossError(*problem);
  }
  return out;
}

StatusOr<std::string> EncodeRolloutNode(const RolloutNodeRecord& node) {
  RETURN_IF_ERROR(CheckUtf8(node.assigned_version, "assigned_version"));
  RETURN_IF_ERROR(CheckUtf8(node.held_version, "held_version"));
  RETURN_IF_ERROR(CheckUtf8(node.error, "error"));
  const Json j = {
      {"v", kValueFormatVersion},
      {"in_rollout", node.in_rollout},
      {"assigned_version", node.assigned_version},
      {"held_version", node.held_version},
      {"state", NodeMapStateName(node.state)},
      {"error", node.error},
      {"updated_at_ms", node.updated_at_ms},
  };
  return Dump(j, "rollout node");
}

StatusOr<RolloutNodeRecord> DecodeRolloutNode(std::string_view node_id, std::string_view value) {
  ASSIGN_OR_RETURN(Json j, ParseValue(value));
  const Reader r(j, "");
  RETURN_IF_ERROR(r.OnlyFields(
      {"v", "in_rollout", "assigned_version", "held_version", "state", "error", "updated_at_ms"}));
  RolloutNodeRecord out;
  out.node_id = std::string(node_id);
  ASSIGN_OR_RETURN(out.in_rollout, r.Bool("in_rollout"));
  ASSIGN_OR_RETURN(out.assigned_version, r.String("assigned_version"));
  ASSIGN_OR_RETURN(out.held_version, r.String("held_version"));
  ASSIGN_OR_RETURN(out.state, r.Enumerated<NodeMapState>("state", &ParseNodeMapState));
  ASSIGN_OR_RETURN(out.error, r.String("error"));
  ASSIGN_OR_RETURN(out.updated_at_ms, r.I64("updated_at_ms"));
  return out;
}

}  // namespace ripplekv::store
