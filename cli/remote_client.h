#pragma once
// The CLI's side of the CalibrationService (docs/API.md): one channel to the scheduler with the
// documented keepalive and backoff arguments, and unary calls that always carry a deadline and
// return absl::Status (gRPC codes map one to one; an unreachable server is UNAVAILABLE).
// Thread-safe: the stub may be called from several threads.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ripplekv/v1/calibration.grpc.pb.h"
#include "proto/client_channel.h"

namespace ripplekv::cli {

// Deadlines of the unary calls (docs/API.md "Deadlines").
inline constexpr std::chrono::seconds kSubmitDeadline{60};
inline constexpr std::chrono::seconds kUnaryDeadline{10};

class RemoteClient {
 public:
  // `address` is host:port. Never fails here: connection errors surface on the first call.
  explicit RemoteClient(const std::string& address, const v1::ClientChannelOptions& options = {});

  // A client with the certificates and token of `files` (proto/client_channel.h). Errors: those
  // of LoadClientSecurity (a file unreadable, flags that do not go together).
  [[nodiscard]] static StatusOr<RemoteClient> Connect(const std::string& address,
                                                      const v1::ClientSecurityFiles& files);

  [[nodiscard]] StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request);
  [[nodiscard]] StatusOr<v1::Job> GetJob(const std::string& job_id);
  // Every page, newest first.
  [[nodiscard]] StatusOr<std::vector<v1::Job>> ListJobs();
  [[nodiscard]] StatusOr<v1::Job> CancelJob(const std::string& job_id);
  // Every page of the job's tasks, by sample then layer.
  [[nodiscard]] StatusOr<std::vector<v1::JobTask>> ListJobTasks(const std::string& job_id);
  // Every page of the workers the scheduler knows (connected, or remembered for a quarantine),
  // by worker id.
  [[nodiscard]] StatusOr<std::vector<v1::WorkerStatus>> ListWorkers();
  [[nodiscard]] StatusOr<v1::Profile> GetProfile(const std::string& model_hash, int64_t version);
  // Every page; `model_hash` empty: every model.
  [[nodiscard]] StatusOr<std::vector<v1::Profile>> ListProfiles(const std::string& model_hash);
  [[nodiscard]] StatusOr<v1::BudgetMap> GetBudgetMap(const v1::GetBudgetMapRequest& request);

  // Streams WatchJob events to `on_event` until the job ends (server closes with OK) or the
  // stream fails. No deadline (docs/API.md). Returns the stream's final status.
  [[nodiscard]] Status WatchJob(const std::string& job_id,
                                const std::function<void(const v1::JobEvent&)>& on_event);

 private:
  std::string address_;
  bool plaintext_ = true;  // no TLS: UNAVAILABLE messages may carry v1::kTlsHint
  std::unique_ptr<v1::CalibrationService::Stub> stub_;
};

// grpc::Status -> Status, code and message unchanged; the address is named for UNAVAILABLE (and
// DEADLINE_EXCEEDED), and a call on a `plaintext` channel that a TLS port hung up on gets
// v1::kTlsHint (proto/client_channel.h) appended.
Status FromGrpc(const grpc::Status& status, const std::string& address, bool plaintext = false);

// Sets `context`'s deadline `deadline` from now (the one way the CLI's clients set deadlines).
void SetDeadline(grpc::ClientContext& context, std::chrono::milliseconds deadline);

// The largest page the services serve (calibration.proto, rollout.proto); fewer round trips for
// long listings.
inline constexpr int32_t kMaxPageSize = 1000;

// Every page of a listing, for every client of the CLI: `call` is the stub's unary method,
// `request` the first page's request (page_size set here to kMaxPageSize), `items` the
// response's repeated field of results. Each page's call carries `deadline`; the first failing
// page's status (FromGrpc) is returned.
template <typename Stub, typename Request, typename Response, typename Item>
StatusOr<std::vector<Item>> AllPages(
    const std::string& address, bool plaintext, Stub* stub,
    grpc::Status (Stub::*call)(grpc::ClientContext*, const Request&, Response*), Request request,
    google::protobuf::RepeatedPtrField<Item>* (Response::*items)(),
    std::chrono::seconds deadline = kUnaryDeadline) {
  std::vector<Item> out;
  request.set_page_size(kMaxPageSize);
  do {
    grpc::ClientContext context;
    SetDeadline(context, deadline);
    Response response;
    RETURN_IF_ERROR(FromGrpc((stub->*call)(&context, request, &response), address, plaintext));
    for (Item& item : *(response.*items)()) out.push_back(std::move(item));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return out;
}

// "PENDING", "RUNNING", ... for a JobState.
std::string JobStateName(v1::JobState state);

}  // namespace ripplekv::cli
