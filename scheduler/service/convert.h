#pragma once
// Conversions between ripplekv.v1 messages and the domain structs of store/ and scheduler/
// (docs/API.md): the only place where the scheduler daemon's gRPC types meet the core. Request
// conversions check what the message shape alone can check and return InvalidArgument naming the
// field by its path in the request ("spec.params.alpha: must be finite and > 0, got -1", the rule
// of method/calibration_params.h); the core checks the rest.
// Status codes map one to one, message unchanged.
//
// All functions are thread-safe (no shared state).

#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "ripplekv/v1/calibration.pb.h"
#include "ripplekv/v1/worker.pb.h"
#include "scheduler/core/scheduler.h"
#include "store/types.h"

namespace ripplekv::scheduler::service {

namespace v1 = ::ripplekv::v1;

// absl and gRPC codes share names and numbers (0..16): code and message are carried unchanged.
grpc::Status ToGrpcStatus(const Status& status);
Status FromGrpcStatus(const grpc::Status& status);

// Whether `hash` is 64 lowercase hex characters (docs/MODEL_HASH.md).
bool IsModelHash(std::string_view hash);
// InvalidArgument "<field>: ..." unless IsModelHash(hash) ("is required" when empty).
[[nodiscard]] Status CheckModelHash(std::string_view hash, std::string_view field);

// Job ids travel as decimal strings. InvalidArgument naming `field` when empty or not a
// positive decimal number; NotFound-worthy values (no such job) are the store's to report.
[[nodiscard]] StatusOr<store::JobId> ParseJobId(std::string_view text, std::string_view field);
std::string FormatJobId(store::JobId id);

// SubmitJobRequest -> the core's request. Defaults are those of `ripplekv calibrate`.
// InvalidArgument naming the field: spec or spec.model missing; spec.model.model_hash missing or
// malformed; spec.params.alpha not finite or <= 0; trials outside 1..1024; samples outside
// 1..65536; context_len < 1; probe_len < 1 or >= context_len; a negative layer; priority outside
// -1000..1000; an idempotency key over 128 characters or not printable ASCII;
// spec.data.format set for a non-path source, or a built-in set other than "mixed" (the default),
// "sherlock-holmes", "tom-sawyer", "code", "docs"; spec.model.n_layers over kMaxLayers;
// context_len over kMaxContextLen. ResourceExhausted naming the limit: inline data over
// kMaxInlineDataBytes, a path or name over kMaxPathBytes, more than kMaxLayers layers listed.
inline constexpr uint64_t kMaxInlineDataBytes = 32ull << 20;
inline constexpr size_t kMaxPathBytes = 4096;       // spec.model.path, spec.data.path, model name
inline constexpr int32_t kMaxLayers = 4096;         // spec.model.n_layers, spec.params.layers size
inline constexpr int32_t kMaxContextLen = 1 << 20;  // spec.params.context_len, tokens

// Largest request of any method but SubmitJob (which may carry kMaxInlineDataBytes of data) and
// largest message on a worker stream, bytes (docs/API.md, "Limits").
inline constexpr size_t kMaxRequestBytes = 4u << 20;
// Most leases one worker may hold at once (RegisterRequest.capacity): its running tasks and the
// ones it queues; a worker cannot hoard a job's tasks beyond it.
inline constexpr int32_t kMaxWorkerCapacity = 64;
// Largest message the server receives at all: a SubmitJob with the most inline data.
inline constexpr size_t kMaxSubmitBytes = kMaxInlineDataBytes + (1u << 20);

// ResourceExhausted naming `what` and the limit when `message` is over `max_bytes` serialized.
[[nodiscard]] Status CheckMessageSize(const google::protobuf::Message& message, size_t max_bytes,
                                      std::string_view what);
[[nodiscard]] StatusOr<SubmitRequest> SubmitRequestFromProto(const v1::SubmitJobRequest& request);

// Domain -> message. Inline data is cleared (the case stays set; inline_bytes gives the size)
// unless `with_inline_data`.
void CalibrationDataToProto(const store::JobSpec& spec, uint64_t inline_bytes,
                            bool with_inline_data, v1::CalibrationData* out);
v1::JobState JobStateToProto(store::JobState state);
// nullopt for JOB_STATE_UNSPECIFIED and unknown numbers.
std::optional<store::JobState> JobStateFromProto(v1::JobState state);
v1::Job JobToProto(const store::Job& job);
// Job plus the live progress the scheduler knows (workers, ETA).
v1::Job JobToProto(const JobProgress& progress);
// A worker as CalibrationService.ListWorkers shows it.
v1::WorkerStatus WorkerInfoToProto(const WorkerInfo& info);
void TimeMsToProto(store::TimeMs ms, google::protobuf::Timestamp* out);
// A stored task -> message (the lease fields only while leased).
v1::JobTask TaskToProto(const store::Task& task);

// A stored profile version -> message. `with_layers` false leaves `layers` empty.
v1::Profile ProfileToProto(const StoredProfile& stored, bool with_layers);

// BudgetParams -> library options (context_len becomes max_context). InvalidArgument naming the
// field ("params.total": neither set; "params.average_tokens: 0 must be > 0", ...), and
// "params.context_len" for the kvpress format without it. per_head is carried as is.
struct BudgetRequest {
  method::BudgetOptions options;
  method::BudgetFormat format = method::BudgetFormat::kNative;
  std::optional<int64_t> context_len;
};
[[nodiscard]] StatusOr<BudgetRequest> BudgetRequestFromProto(const v1::BudgetParams& params);
// The map and the parameters asked, defaults resolved; a per-head map's head_tokens as
// BudgetMap.head_tokens.
v1::BudgetMap BudgetMapToProto(const method::BudgetMap& map, const BudgetRequest& request,
                               uint32_t profile_version, const std::string& formatted_json);

// RegisterRequest -> core registration. InvalidArgument naming the field: worker_id empty, over
// 128 characters or not printable ASCII; model missing; model.model_hash malformed;
// capacity outside 1..kMaxWorkerCapacity.
[[nodiscard]] StatusOr<WorkerRegistration> RegistrationFromProto(
    const v1::RegisterRequest& request);

// Task ids name one lease: "<job>-<sample>-<layer>-<attempt>".
std::string FormatTaskId(const LeaseId& lease);
// InvalidArgument naming `field` when `text` is not a task id.
[[nodiscard]] StatusOr<LeaseId> ParseTaskId(std::string_view text, std::string_view field);

// An assignment for the worker stream, with the job's model hash and parameters.
v1::TaskAssignment AssignmentToProto(const Assignment& assignment);

}  // namespace ripplekv::scheduler::service
