#pragma once
// The CLI's side of the RolloutService (proto/ripplekv/v1/rollout.proto): budget-map versions and
// their rollouts on a scheduler. Same channel, deadlines and error mapping as RemoteClient: every
// call carries a deadline and returns absl::Status with the gRPC code unchanged (an unreachable
// server is UNAVAILABLE, naming the address); list calls collect every page.
// Thread-safe: the stub may be called from several threads.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "proto/client_channel.h"
#include "ripplekv/v1/rollout.grpc.pb.h"

namespace ripplekv::cli {

// Deadline of CreateBudgetMap, which reads a profile, computes the map and writes it.
inline constexpr std::chrono::seconds kCreateMapDeadline{60};
// Deadline of every other call (docs/API.md "Deadlines").
inline constexpr std::chrono::seconds kRolloutCallDeadline{10};

class RolloutClient {
 public:
  // `address` is host:port. Never fails here: connection errors surface on the first call.
  explicit RolloutClient(const std::string& address, const v1::ClientChannelOptions& options = {});

  // A client with the certificates and token of `files` (proto/client_channel.h). Errors: those
  // of LoadClientSecurity (a file unreadable, flags that do not go together).
  [[nodiscard]] static StatusOr<RolloutClient> Connect(const std::string& address,
                                                       const v1::ClientSecurityFiles& files);

  // Each returns the server's status on failure (rollout.proto lists the codes per call).
  [[nodiscard]] StatusOr<v1::CreateBudgetMapResponse> CreateBudgetMap(
      const v1::CreateBudgetMapRequest& request);
  // `version`: a version id or "latest".
  [[nodiscard]] StatusOr<v1::BudgetMapVersion> GetBudgetMap(const std::string& model_hash,
                                                            const std::string& version);
  // Every page, newest first; without per-layer tokens and documents.
  [[nodiscard]] StatusOr<std::vector<v1::BudgetMapVersion>> ListBudgetMaps(
      const std::string& model_hash);

  [[nodiscard]] StatusOr<v1::Rollout> CreateRollout(const v1::CreateRolloutRequest& request);
  [[nodiscard]] StatusOr<v1::Rollout> GetRollout(const std::string& rollout_id);
  // Every page, newest first, without per-node states; `model_hash` empty: every model.
  [[nodiscard]] StatusOr<std::vector<v1::Rollout>> ListRollouts(const std::string& model_hash);
  // `reason` empty: the scheduler records "paused by operator".
  [[nodiscard]] StatusOr<v1::Rollout> PauseRollout(const std::string& rollout_id,
                                                   const std::string& reason);
  [[nodiscard]] StatusOr<v1::Rollout> ResumeRollout(const std::string& rollout_id);
  [[nodiscard]] StatusOr<v1::Rollout> RollbackRollout(const std::string& rollout_id);

 private:
  std::string address_;
  bool plaintext_ = true;  // no TLS: UNAVAILABLE messages may carry v1::kTlsHint
  std::unique_ptr<v1::RolloutService::Stub> stub_;
};

}  // namespace ripplekv::cli
