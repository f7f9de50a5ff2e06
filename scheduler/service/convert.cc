#include "scheduler/service/convert.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/strings.h"
#include "method/calibration_params.h"
#include "method/calibration_sets.h"
#include "proto/budget_params.h"
#include "proto/calibration_params.h"
#include "proto/profile.h"
#include "scheduler/core/job_plan.h"

namespace ripplekv::scheduler::service {
namespace {

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

template <typename T>
bool ParseDecimal(std::string_view text, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}
template <typename T>
bool ParseDecimal(absl::string_view text, T* out) {
  return ParseDecimal(std::string_view(text.data(), text.size()), out);
}

// Checks an optional int32 against [lo, hi]; returns its value or `fallback` when unset.
// This API's limit on a parameter the method bounds only from below.
Status AtMost(int64_t value, int64_t max, std::string_view field) {
  if (value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), ": ", value, " is over ", max));
}

// ResourceExhausted naming `field` when `text` is longer than `max_bytes`.
Status CheckLength(std::string_view text, size_t max_bytes, std::string_view field) {
  if (text.size() <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(std::string(field), ": ", text.size(), " bytes, at most ", max_bytes));
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

Status FromGrpcStatus(const grpc::Status& status) {
  return Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsModelHash(std::string_view hash) {
  if (hash.size() != 64) return false;
  for (char c : hash) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status CheckModelHash(std::string_view hash, std::string_view field) {
  if (hash.empty())
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), " is required"));
  if (!IsModelHash(hash)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": \"",
                                                   std::string(hash.substr(0, 80)),
                                                   "\" is not 64 lowercase hex characters"));
  }
  return absl::OkStatus();
}

StatusOr<store::JobId> ParseJobId(std::string_view text, std::string_view field) {
  if (text.empty())
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), " is required"));
  store::JobId id = 0;
  if (!ParseDecimal(text, &id) || id == store::kNoJob) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": \"", std::string(text.substr(0, 80)), "\" is not a job id"));
  }
  return id;
}

std::string FormatJobId(store::JobId id) { return absl::StrCat(id); }

StatusOr<SubmitRequest> SubmitRequestFromProto(const v1::SubmitJobRequest& request) {
  if (!request.has_spec()) return absl::InvalidArgumentError("spec is required");
  const v1::JobSpec& in = request.spec();
  if (!in.has_model()) return absl::InvalidArgumentError("spec.model is required");
  RETURN_IF_ERROR(CheckModelHash(in.model().model_hash(), "spec.model.model_hash"));
  const std::string& key = request.idempotency_key();
  if (key.size() > 128 || !IsPrintableAscii(key)) {
    return absl::InvalidArgumentError("idempotency_key: must be 1..128 printable ASCII characters");
  }
  if (in.priority() < -1000 || in.priority() > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.priority: ", in.priority(), " is outside -1000..1000"));
  }

  SubmitRequest out;
  store::JobSpec& spec = out.spec;
  spec.model_hash = in.model().model_hash();
  RETURN_IF_ERROR(CheckLength(in.model().path(), kMaxPathBytes, "spec.model.path"));
  RETURN_IF_ERROR(CheckLength(in.model().name(), kMaxPathBytes, "spec.model.name"));
  RETURN_IF_ERROR(CheckLength(in.data().path(), kMaxPathBytes, "spec.data.path"));
  spec.model_path = in.model().path();
  if (in.model().n_layers() < 0 || in.model().n_layers() > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("spec.model.n_layers: ", in.model().n_layers(),
                                                   " is outside 0..", kMaxLayers));
  }
  if (in.params().layers_size() > kMaxLayers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spec.params.layers: ", in.params().layers_size(), " entries, at most ", kMaxLayers));
  }
  out.model_n_layers = in.model().n_layers();
  out.model_name = in.model().name();
  if (in.has_verify()) {
    if (!(in.verify() >= 0 && in.verify() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.verify: ", in.verify(), " is outside 0..1"));
    }
    out.verify_fraction = in.verify();
  }
  spec.priority = in.priority();
  spec.idempotency_key = key;

  const v1::CalibrationData& data = in.data();
  if (data.format() != v1::DATA_FORMAT_UNSPECIFIED &&
      data.source_case() != v1::CalibrationData::kPath) {
    return absl::InvalidArgumentError("spec.data.format: only allowed with spec.data.path");
  }
  switch (data.format()) {
    case v1::DATA_FORMAT_UNSPECIFIED:
      spec.data_format = store::DataFormat::kAuto;
      break;
    case v1::DATA_FORMAT_JSONL:
      spec.data_format = store::DataFormat::kJsonl;
      break;
    case v1::DATA_FORMAT_TEXT:
      spec.data_format = store::DataFormat::kText;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("spec.data.format: unknown value ", static_cast<int>(data.format())));
  }
  spec.data_strict = data.strict();
  switch (data.source_case()) {
    case v1::CalibrationData::kText:
      spec.data_inline = data.text();
      spec.data_format = store::DataFormat::kText;
      break;
    case v1::CalibrationData::kJsonl:
      for (const std::string& line : data.jsonl().lines()) {
        if (line.find('\n') != std::string::npos) {
          return absl::InvalidArgumentError("spec.data.jsonl.lines: a line contains a newline");
        }
        spec.data_inline += line;
        spec.data_inline += '\n';
      }
      spec.data_format = store::DataFormat::kJsonl;
      if (spec.data_inline.empty()) {
        return absl::InvalidArgumentError("spec.data.jsonl.lines: empty");
      }
      break;
    case v1::CalibrationData::kPath:
      if (data.path().empty() || data.path().front() != '/') {
        return absl::InvalidArgumentError(absl::StrCat(
            "spec.data.path: \"", EscapeForLog(data.path()), "\" is not an absolute path"));
      }
      spec.data_path = data.path();
      break;
    case v1::CalibrationData::kBuiltin:
      if (!method::BuiltinSetDomain(data.builtin())) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec.data.builtin: \"", EscapeForLog(data.builtin()),
                         "\" is not a built-in set (", method::BuiltinCalibrationSetList(), ")"));
      }
      spec.data_builtin = data.builtin();
      break;
    case v1::CalibrationData::SOURCE_NOT_SET:
      break;
  }
  if (data.source_case() == v1::CalibrationData::kText && spec.data_inline.empty()) {
    return absl::InvalidArgumentError("spec.data.text: empty");
  }
  if (spec.data_inline.size() > kMaxInlineDataBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("spec.data: ", spec.data_inline.size(),
                                                     " bytes of inline data, at most ",
                                                     kMaxInlineDataBytes));
  }

  // The one conversion (proto/calibration_params.h), the response grid resolved (a response job
  // is stored with its grid and one trial per budget, so it plans as any other), then the
  // method's rules, stated once (method/calibration_params.h; the layer count is the core's),
  // then this API's limits.
  ASSIGN_OR_RETURN(spec.params, v1::CalibrationParamsFromProto(in.params(), "spec.params"));
  spec.params = method::ResolveResponseGrid(std::move(spec.params));
  method::CalibrationParams& params = spec.params;
  // The server deduplicates and sorts the layers (calibration.proto): a repeat is not an error
  // here, and a negative layer is named at its place among the distinct ones as given.
  std::vector<int64_t> distinct;
  for (int64_t layer : params.layers) {
    if (std::find(distinct.begin(), distinct.end(), layer) == distinct.end()) {
      distinct.push_back(layer);
    }
  }
  params.layers = std::move(distinct);
  if (Status s = method::ValidateCalibrationParams(params, /*n_layers=*/0); !s.ok()) {
    return Status(s.code(), absl::StrCat("spec.", s.message()));
  }
  std::sort(params.layers.begin(), params.layers.end());
  RETURN_IF_ERROR(AtMost(params.trials, 1024, "spec.params.trials"));
  RETURN_IF_ERROR(AtMost(params.samples, 65536, "spec.params.samples"));
  RETURN_IF_ERROR(AtMost(params.max_samples, 65536, "spec.params.max_samples"));
  RETURN_IF_ERROR(AtMost(params.context_len, kMaxContextLen, "spec.params.context_len"));
  return out;
}

void CalibrationDataToProto(const store::JobSpec& spec, uint64_t inline_bytes,
                            bool with_inline_data, v1::CalibrationData* out) {
  out->set_strict(spec.data_strict);
  inline_bytes = std::max<uint64_t>(inline_bytes, spec.data_inline.size());
  if (inline_bytes > 0) {
    if (spec.data_format == store::DataFormat::kJsonl) {
      v1::JsonlLines* lines = out->mutable_jsonl();
      if (with_inline_data) {
        for (absl::string_view line : absl::StrSplit(spec.data_inline, '\n', absl::SkipEmpty())) {
          lines->add_lines(std::string(line));
        }
      }
    } else {
      out->set_text(with_inline_data ? spec.data_inline : std::string());
    }
    out->set_inline_bytes(static_cast<int64_t>(inline_bytes));
  } else if (!spec.data_path.empty()) {
    out->set_path(spec.data_path);
    out->set_format(spec.data_format == store::DataFormat::kJsonl  ? v1::DATA_FORMAT_JSONL
                    : spec.data_format == store::DataFormat::kText ? v1::DATA_FORMAT_TEXT
                                                                   : v1::DATA_FORMAT_UNSPECIFIED);
  } else {
    out->set_builtin(spec.data_builtin.empty() ? std::string(method::kDefaultCalibrationSet)
                                               : spec.data_builtin);
  }
}

v1::JobState JobStateToProto(store::JobState state) {
  switch (state) {
    case store::JobState::kPending:
      return v1::JOB_STATE_PENDING;
    case store::JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case store::JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case store::JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case store::JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<store::JobState> JobStateFromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_PENDING:
      return store::JobState::kPending;
    case v1::JOB_STATE_RUNNING:
      return store::JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED:
      return store::JobState::kSucceeded;
    case v1::JOB_STATE_FAILED:
      return store::JobState::kFailed;
    case v1::JOB_STATE_CANCELLED:
      return store::JobState::kCancelled;
    default:
      return std::nullopt;
  }
}

void TimeMsToProto(store::TimeMs ms, google::protobuf::Timestamp* out) {
  int64_t seconds = ms / 1000;
  int64_t millis = ms % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(millis * 1'000'000));
}

v1::JobTask TaskToProto(const store::Task& task) {
  v1::JobTask out;
  out.set_sample(static_cast<int32_t>(task.key.sample));
  out.set_layer(static_cast<int32_t>(task.key.layer));
  switch (task.state) {
    case store::TaskState::kPending:
      out.set_state(v1::TASK_STATE_PENDING);
      break;
    case store::TaskState::kLeased:
      out.set_state(v1::TASK_STATE_LEASED);
      out.set_lease_owner(task.lease_owner);
      TimeMsToProto(task.lease_deadline_ms, out.mutable_lease_deadline());
      break;
    case store::TaskState::kDone:
      out.set_state(v1::TASK_STATE_DONE);
      break;
  }
  out.set_attempts(static_cast<int32_t>(task.attempts));
  out.set_completed_by(task.completed_by);
  out.set_completed_by_version(task.completed_by_version);
  return out;
}

v1::Job JobToProto(const store::Job& job) {
  v1::Job out;
  out.set_job_id(FormatJobId(job.id));
  v1::JobSpec* spec = out.mutable_spec();
  spec->mutable_model()->set_model_hash(job.spec.model_hash);
  spec->mutable_model()->set_path(job.spec.model_path);
  CalibrationDataToProto(job.spec, job.data_inline_bytes, /*with_inline_data=*/false,
                         spec->mutable_data());
  v1::CalibrationParamsToProto(job.spec.params, spec->mutable_params());
  spec->set_priority(job.spec.priority);
  spec->set_verify(job.spec.verify_fraction);
  out.set_state(JobStateToProto(job.state));
  v1::JobProgress* progress = out.mutable_progress();
  progress->set_tasks_done(static_cast<int64_t>(job.tasks_done));
  progress->set_tasks_total(static_cast<int64_t>(job.tasks_total));
  progress->set_trials_done(static_cast<int64_t>(job.results_stored));
  progress->set_trials_total(static_cast<int64_t>(job.tasks_total * job.spec.params.trials));
  progress->set_samples_planned(static_cast<int32_t>(job.samples_planned));
  if (job.state == store::JobState::kFailed) {
    // The store keeps the reason only; the code is not recorded.
    out.mutable_error()->set_code(static_cast<int32_t>(absl::StatusCode::kUnknown));
    out.mutable_error()->set_message(job.error);
  }
  out.set_idempotency_key(job.spec.idempotency_key);
  out.set_profile_version(job.profile_version);
  TimeMsToProto(job.created_at_ms, out.mutable_create_time());
  TimeMsToProto(job.updated_at_ms, out.mutable_update_time());
  if (IsTerminal(job.state)) TimeMsToProto(job.updated_at_ms, out.mutable_end_time());
  return out;
}

v1::Job JobToProto(const JobProgress& progress) {
  v1::Job out = JobToProto(progress.job);
  out.mutable_progress()->set_workers(static_cast<int32_t>(progress.tasks_leased));
  out.mutable_progress()->set_waiting_reason(progress.waiting_reason);
  out.mutable_progress()->set_tasks_verified(static_cast<int64_t>(progress.tasks_verified));
  out.mutable_progress()->set_disagreements(static_cast<int32_t>(progress.disagreements));
  if (progress.eta_ms >= 0) {
    out.mutable_progress()->mutable_eta()->set_seconds(progress.eta_ms / 1000);
    out.mutable_progress()->mutable_eta()->set_nanos(
        static_cast<int32_t>((progress.eta_ms % 1000) * 1'000'000));
  }
  return out;
}

v1::Profile ProfileToProto(const StoredProfile& stored, bool with_layers) {
  v1::Profile out;
  out.set_model_hash(stored.model_hash);
  out.set_version(stored.version);
  if (stored.job != store::kNoJob) out.set_job_id(FormatJobId(stored.job));
  TimeMsToProto(stored.created_at_ms / 1000 * 1000, out.mutable_create_time());
  v1::ProfileToProto(stored.profile, with_layers, &out);
  return out;
}

StatusOr<BudgetRequest> BudgetRequestFromProto(const v1::BudgetParams& params) {
  BudgetRequest out;
  switch (params.total_case()) {
    case v1::BudgetParams::kAverageTokens:
      if (params.average_tokens() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("params.average_tokens: ", params.average_tokens(), " must be > 0"));
      }
      out.options.average_tokens = params.average_tokens();
      break;
    case v1::BudgetParams::kTotalTokens:
      if (params.total_tokens() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("params.total_tokens: ", params.total_tokens(), " must be > 0"));
      }
      out.options.total_tokens = params.total_tokens();
      break;
    case v1::BudgetParams::TOTAL_NOT_SET:
      return absl::InvalidArgumentError("params.average_tokens or params.total_tokens is required");
  }
  if (params.has_ratio()) out.options.ratio = params.ratio();
  if (params.has_min_tokens()) out.options.min_tokens = params.min_tokens();
  if (params.has_max_tokens()) out.options.max_tokens = params.max_tokens();
  switch (params.normalization()) {
    case v1::NORMALIZATION_UNSPECIFIED:
    case v1::NORMALIZATION_MIN_MAX:
      out.options.normalization = method::Normalization::kMinMax;
      break;
    case v1::NORMALIZATION_RANK:
      out.options.normalization = method::Normalization::kRank;
      break;
    case v1::NORMALIZATION_LOG_MIN_MAX:
      out.options.normalization = method::Normalization::kLogMinMax;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("params.normalization: unknown value ",
                                                     static_cast<int>(params.normalization())));
  }
  if (params.has_shrink_z()) {
    if (!(params.shrink_z() >= 0) || !std::isfinite(params.shrink_z())) {
      return absl::InvalidArgumentError(
          absl::StrCat("params.shrink_z: ", params.shrink_z(), " must be finite and >= 0"));
    }
    out.options.shrink_z = params.shrink_z();
  }
  out.options.per_head = params.per_head();
  if (params.has_context_len()) {
    if (params.context_len() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("params.context_len: ", params.context_len(), " must be > 0"));
    }
    out.context_len = params.context_len();
    out.options.max_context = params.context_len();
  }
  switch (params.format()) {
    case v1::BUDGET_FORMAT_UNSPECIFIED:
    case v1::BUDGET_FORMAT_NATIVE:
      out.format = method::BudgetFormat::kNative;
      break;
    case v1::BUDGET_FORMAT_KVPRESS:
      out.format = method::BudgetFormat::kKvpress;
      if (!out.context_len) {
        return absl::InvalidArgumentError(
            "params.context_len is required for BUDGET_FORMAT_KVPRESS");
      }
      break;
    case v1::BUDGET_FORMAT_TRTLLM:
      out.format = method::BudgetFormat::kTrtllm;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("params.format: unknown value ", static_cast<int>(params.format())));
  }
  return out;
}

v1::BudgetMap BudgetMapToProto(const method::BudgetMap& map, const BudgetRequest& request,
                               uint32_t profile_version, const std::string& formatted_json) {
  v1::BudgetMap out;
  out.set_model_hash(map.model_hash);
  out.set_profile_version(profile_version);
  v1::BudgetParams* params = out.mutable_params();
  *params = v1::BudgetParamsFromOptions(map.options);
  // The context length asked (the map's max_context is the same number when it was given).
  if (request.context_len) params->set_context_len(*request.context_len);
  switch (request.format) {
    case method::BudgetFormat::kNative:
      params->set_format(v1::BUDGET_FORMAT_NATIVE);
      break;
    case method::BudgetFormat::kKvpress:
      params->set_format(v1::BUDGET_FORMAT_KVPRESS);
      break;
    case method::BudgetFormat::kTrtllm:
      params->set_format(v1::BUDGET_FORMAT_TRTLLM);
      break;
  }
  out.set_total_tokens(map.total_tokens);
  for (int64_t t : map.tokens) out.add_tokens(t);
  for (const std::vector<int64_t>& heads : map.head_tokens) {
    out.add_head_tokens()->mutable_tokens()->Add(heads.begin(), heads.end());
  }
  for (double m : map.multipliers) out.add_multipliers(m);
  for (double n : map.normalized) out.add_normalized(n);
  out.set_formatted_json(formatted_json);
  return out;
}

StatusOr<WorkerRegistration> RegistrationFromProto(const v1::RegisterRequest& request) {
  const std::string& id = request.worker_id();
  if (id.empty()) return absl::InvalidArgumentError("worker_id is required");
  if (id.size() > 128 || !IsPrintableAscii(id)) {
    return absl::InvalidArgumentError("worker_id: must be 1..128 printable ASCII characters");
  }
  if (!request.has_model()) return absl::InvalidArgumentError("model is required");
  RETURN_IF_ERROR(CheckModelHash(request.model().model_hash(), "model.model_hash"));
  if (request.capacity() < 1 || request.capacity() > kMaxWorkerCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("capacity: ", request.capacity(), " is outside 1..", kMaxWorkerCapacity));
  }
  WorkerRegistration out;
  out.worker_id = id;
  out.capacity = static_cast<uint32_t>(request.capacity());
  // Stored with the tasks it completes: bounded, and text (empty: not reported).
  if (request.version().size() > 256 ||
      (!request.version().empty() && !IsPrintableAscii(request.version()))) {
    return absl::InvalidArgumentError("version: must be at most 256 printable ASCII characters");
  }
  out.version = request.version();
  // Logged and listed: bounded text (empty: not reported).
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"host", &request.host()},
        {"device", &request.device()},
        {"numerics", &request.numerics()},
        {"instance", &request.instance()}}) {
    if (value->size() > 256 || (!value->empty() && !IsPrintableAscii(*value))) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must be at most 256 printable ASCII characters"));
    }
  }
  out.host = request.host();
  out.device = request.device();
  out.numerics = request.numerics();
  out.instance = request.instance();
  out.replace = request.replace();
  out.model = v1::ModelFromProto(request.model());
  return out;
}

v1::WorkerStatus WorkerInfoToProto(const WorkerInfo& info) {
  v1::WorkerStatus out;
  out.set_worker_id(info.worker_id);
  out.set_connected(info.connected);
  out.set_model_hash(info.model_hash);
  out.set_version(info.version);
  out.set_device(info.device);
  out.set_numerics(info.numerics);
  out.set_capacity(static_cast<int32_t>(info.capacity));
  out.set_leases(static_cast<int32_t>(info.leases));
  if (info.last_seen_ms > 0) TimeMsToProto(info.last_seen_ms, out.mutable_last_seen());
  out.set_recent_failures(static_cast<int32_t>(info.recent_failures));
  out.set_quarantined(info.quarantined);
  out.set_quarantine_reason(info.quarantine_reason);
  if (info.quarantined) TimeMsToProto(info.quarantined_until_ms, out.mutable_quarantined_until());
  out.set_tasks_completed(static_cast<int64_t>(info.tasks_completed));
  return out;
}

Status CheckMessageSize(const google::protobuf::Message& message, size_t max_bytes,
                        std::string_view what) {
  const size_t bytes = message.ByteSizeLong();
  if (bytes <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(std::string(what), ": the message is ", bytes, " bytes, at most ", max_bytes));
}

std::string FormatTaskId(const LeaseId& lease) {
  return absl::StrCat(lease.key.job, "-", lease.key.sample, "-", lease.key.layer, "-",
                      lease.attempt);
}

StatusOr<LeaseId> ParseTaskId(std::string_view text, std::string_view field) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), '-');
  LeaseId lease;
  if (parts.size() != 4 || !ParseDecimal(parts[0], &lease.key.job) ||
      !ParseDecimal(parts[1], &lease.key.sample) || !ParseDecimal(parts[2], &lease.key.layer) ||
      !ParseDecimal(parts[3], &lease.attempt)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": \"",
                                                   EscapeForLog(text, 80),
                                                   "\" is not a task id of this scheduler"));
  }
  return lease;
}

v1::TaskAssignment AssignmentToProto(const Assignment& assignment) {
  v1::TaskAssignment out;
  out.set_task_id(FormatTaskId({.key = assignment.key, .attempt = assignment.attempts}));
  out.set_job_id(FormatJobId(assignment.key.job));
  out.set_model_hash(assignment.model_hash);
  out.set_sample(static_cast<int32_t>(assignment.key.sample));
  out.set_layer(static_cast<int32_t>(assignment.key.layer));
  v1::CalibrationParamsToProto(assignment.params, out.mutable_params());
  return out;
}

}  // namespace ripplekv::scheduler::service
