#include "scheduler/service/rollout_service.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "scheduler/service/convert.h"
#include "scheduler/service/rollout_convert.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr size_t kMaxNodeIdChars = 128;
constexpr size_t kVersionChars = 16;

Status CheckNodeId(const std::string& node_id) {
  const bool ok = !node_id.empty() && node_id.size() <= kMaxNodeIdChars &&
                  std::all_of(node_id.begin(), node_id.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat("node_id: \"", EscapeForLog(node_id), "\" must be 1..",
                                        kMaxNodeIdChars, " characters of [A-Za-z0-9._:-]"));
}

// A map version id (16 lowercase hex digits); empty allowed when `optional`.
Status CheckVersion(const std::string& version, std::string_view field, bool optional) {
  if (version.empty() && optional) return absl::OkStatus();
  const bool ok =
      version.size() == kVersionChars && std::all_of(version.begin(), version.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(field, ": \"", EscapeForLog(version),
                                        "\" is not a map version (", kVersionChars,
                                        " lowercase hex digits)"));
}

}  // namespace

// One WatchBudgets stream: the engine's sink for one node. Only the newest assignment waits (an
// older one not yet written is replaced); at most one write is in flight; gRPC calls are made
// without holding mu_. Owned by the service's stream table (and the engine while it watches);
// OnDone removes it from both.
class RolloutServiceImpl::NodeStream final : public grpc::ServerWriteReactor<v1::BudgetAssignment>,
                                             public rollout::AssignmentSink {
 public:
  NodeStream(RolloutServiceImpl* owner, const v1::WatchBudgetsRequest& request)
      : owner_(owner), node_id_(request.node_id()), model_hash_(request.model_hash()) {}

  void Offer(const rollout::Assignment& assignment, uint64_t sequence) override {
    v1::BudgetAssignment message = AssignmentToProto(assignment);
    {
      std::lock_guard lock(mu_);
      if (sequence <= last_sequence_) return;
      last_sequence_ = sequence;
      waiting_ = std::move(message);
    }
    Pump();
  }

  void Replace() override {
    Close(grpc::Status(grpc::StatusCode::ABORTED, Cat("a newer WatchBudgets stream of node ",
                                                      node_id_, " replaced this one")));
  }

  // Ends the stream with `status` after the write in flight.
  void Close(const grpc::Status& status) {
    {
      std::lock_guard lock(mu_);
      if (!close_) close_ = status;
      waiting_.reset();
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;
    }
    Pump();
  }

  void OnCancel() override {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    Pump();
  }

  void OnDone() override {
    done_ = true;
    owner_->options_.engine->Unwatch(node_id_, model_hash_, this);
    owner_->Ended(this);  // may delete this: nothing may follow
  }

  // OnDone ran: the stream is over (a watch registered after it must be undone).
  bool done() const { return done_; }

 private:
  void Pump() {
    std::optional<grpc::Status> finish;
    bool write = false;
    {
      std::lock_guard lock(mu_);
      if (finishing_ || writing_) return;
      if (cancelled_) {
        finish = close_.value_or(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      } else if (close_) {
        finish = *close_;
      } else if (waiting_) {
        writing_ = true;
        writing_message_ = *std::move(waiting_);
        waiting_.reset();
        write = true;
      }
      if (finish) finishing_ = true;
    }
    if (write) {
      StartWrite(&writing_message_);
    } else if (finish) {
      Finish(*finish);  // may run OnDone (and delete this) inline: nothing may follow
    }
  }

  RolloutServiceImpl* const owner_;
  const std::string node_id_;
  const std::string model_hash_;
  std::mutex mu_;
  std::optional<v1::BudgetAssignment> waiting_;  // the newest assignment not yet written
  v1::BudgetAssignment writing_message_;         // the one in flight (valid while writing_)
  uint64_t last_sequence_ = 0;
  bool writing_ = false;
  bool cancelled_ = false;
  bool finishing_ = false;
  std::optional<grpc::Status> close_;
  std::atomic<bool> done_ = false;
};

namespace {

// A stream refused before it started.
class RefusedStream final : public grpc::ServerWriteReactor<v1::BudgetAssignment> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

RolloutServiceImpl::RolloutServiceImpl(RolloutServiceOptions options)
    : options_(std::move(options)) {}

RolloutServiceImpl::~RolloutServiceImpl() { Shutdown(); }

void RolloutServiceImpl::Shutdown() {
  std::vector<std::shared_ptr<NodeStream>> open;
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
    for (const auto& [raw, stream] : streams_) open.push_back(stream);
  }
  for (const auto& stream : open) {
    stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
}

size_t RolloutServiceImpl::open_streams() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

void RolloutServiceImpl::Ended(const NodeStream* stream) {
  std::shared_ptr<NodeStream> last;  // released after mu_
  std::lock_guard lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  last = std::move(it->second);
  streams_.erase(it);
}

Status RolloutServiceImpl::CheckNode(const grpc::CallbackServerContext& context,
                                     const std::string& node_id) const {
  if (options_.tokens == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(Caller caller, CallerOf(*options_.tokens, context));
  if (caller.role != Role::kAgent || caller.node_id == node_id) return absl::OkStatus();
  return absl::PermissionDeniedError(Cat("the agent token of node ", caller.node_id,
                                         " may not act for node ", EscapeForLog(node_id)));
}

Status RolloutServiceImpl::DoCreateBudgetMap(const v1::CreateBudgetMapRequest& request,
                                             v1::CreateBudgetMapResponse* response) {
  RETURN_IF_ERROR(CheckMessageSize(request, kMaxRequestBytes, "CreateBudgetMap"));
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  if (request.profile_version() < 0) {
    return absl::InvalidArgumentError(
        Cat("profile_version: ", request.profile_version(), " is negative"));
  }
  if (request.profile_version() > UINT32_MAX) {
    return absl::NotFoundError(Cat("profile_version: no version ", request.profile_version()));
  }
  if (!request.has_params()) return absl::InvalidArgumentError("params is required");
  v1::BudgetParams params = request.params();
  params.clear_format();  // formats are chosen per node
  ASSIGN_OR_RETURN(BudgetRequest budget, BudgetRequestFromProto(params));
  const method::SelectionIntent selection = SelectionFromProto(request.selection());
  RETURN_IF_ERROR(method::ValidateSelectionIntent(selection));
  ASSIGN_OR_RETURN(
      ProfileBudgetMap computed,
      options_.scheduler->GetBudgetMap(
          request.model_hash(), static_cast<uint32_t>(request.profile_version()), budget.options));
  ASSIGN_OR_RETURN(
      rollout::FrozenVersion frozen,
      rollout::FreezeBudgetMap(*options_.store, computed.profile.version, computed.map, selection));
  *response->mutable_map() = BudgetMapVersionToProto(frozen.map, /*full=*/true);
  response->set_existing(!frozen.created);
  if (frozen.created) {
    spdlog::info("budget map {} of model {} frozen (sequence {}, profile version {})",
                 response->map().version(), request.model_hash().substr(0, 12),
                 response->map().sequence(), computed.profile.version);
  }
  return absl::OkStatus();
}

Status RolloutServiceImpl::DoGetBudgetMap(const v1::GetBudgetMapVersionRequest& request,
                                          v1::BudgetMapVersion* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  StatusOr<store::BudgetMapRecord> record;
  if (request.version() == "latest") {
    record = options_.store->GetBudgetMap(request.model_hash(), store::kLatestVersion);
  } else {
    RETURN_IF_ERROR(CheckVersion(request.version(), "version", /*optional=*/false));
    record = options_.store->GetBudgetMapByDigest(request.model_hash(), request.version());
  }
  RETURN_IF_ERROR(record.status());
  ASSIGN_OR_RETURN(*response, BudgetMapVersionFromRecord(*record, /*full=*/true));
  return absl::OkStatus();
}

Status RolloutServiceImpl::DoListBudgetMaps(const v1::ListBudgetMapVersionsRequest& request,
                                            v1::ListBudgetMapVersionsResponse* response) {
  RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  ASSIGN_OR_RETURN(std::vector<store::BudgetMapRecord> records,
                   options_.store->ListBudgetMaps(request.model_hash()));
  std::reverse(records.begin(), records.end());  // newest first
  ASSIGN_OR_RETURN(
      PageRange range,
      Page({.page_size = request.page_size(), .page_token = request.page_token()}, records.size()));
  for (size_t i = range.begin; i < range.end; ++i) {
    ASSIGN_OR_RETURN(*response->add_maps(), BudgetMapVersionFromRecord(records[i], /*full=*/false));
  }
  response->set_next_page_token(NextPageToken(range, records.size()));
  return absl::OkStatus();
}

Status RolloutServiceImpl::DoListRollouts(const v1::ListRolloutsRequest& request,
                                          v1::ListRolloutsResponse* response) {
  if (!request.model_hash().empty()) {
    RETURN_IF_ERROR(CheckModelHash(request.model_hash(), "model_hash"));
  }
  const std::vector<rollout::RolloutView> rollouts =
      options_.engine->List(request.model_hash());  // newest first
  ASSIGN_OR_RETURN(PageRange range,
                   Page({.page_size = request.page_size(), .page_token = request.page_token()},
                        rollouts.size()));
  for (size_t i = range.begin; i < range.end; ++i) {
    *response->add_rollouts() = RolloutToProto(rollouts[i]);
  }
  response->set_next_page_token(NextPageToken(range, rollouts.size()));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* RolloutServiceImpl::CreateBudgetMap(
    grpc::CallbackServerContext* context, const v1::CreateBudgetMapRequest* request,
    v1::CreateBudgetMapResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoCreateBudgetMap(*request, response); });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::GetBudgetMap(
    grpc::CallbackServerContext* context, const v1::GetBudgetMapVersionRequest* request,
    v1::BudgetMapVersion* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoGetBudgetMap(*request, response); });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::ListBudgetMaps(
    grpc::CallbackServerContext* context, const v1::ListBudgetMapVersionsRequest* request,
    v1::ListBudgetMapVersionsResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoListBudgetMaps(*request, response); });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::CreateRollout(grpc::CallbackServerContext* context,
                                                            const v1::CreateRolloutRequest* request,
                                                            v1::Rollout* response) {
  return AnswerOnPool(options_.pool, context, [=, this]() -> Status {
    RETURN_IF_ERROR(CheckModelHash(request->model_hash(), "model_hash"));
    RETURN_IF_ERROR(CheckVersion(request->map_version(), "map_version", /*optional=*/false));
    ASSIGN_OR_RETURN(rollout::RolloutView view,
                     options_.engine->Create(RolloutRequestFromProto(*request)));
    *response = RolloutToProto(view);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::GetRollout(grpc::CallbackServerContext* context,
                                                         const v1::GetRolloutRequest* request,
                                                         v1::Rollout* response) {
  return AnswerOnPool(options_.pool, context, [=, this]() -> Status {
    ASSIGN_OR_RETURN(rollout::RolloutView view,
                     options_.engine->Get(request->rollout_id(), /*with_nodes=*/true));
    *response = RolloutToProto(view);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::ListRollouts(grpc::CallbackServerContext* context,
                                                           const v1::ListRolloutsRequest* request,
                                                           v1::ListRolloutsResponse* response) {
  return AnswerOnPool(options_.pool, context,
                      [=, this] { return DoListRollouts(*request, response); });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::PauseRollout(grpc::CallbackServerContext* context,
                                                           const v1::PauseRolloutRequest* request,
                                                           v1::Rollout* response) {
  return AnswerOnPool(options_.pool, context, [=, this]() -> Status {
    if (request->reason().size() > 1024) {
      return absl::InvalidArgumentError("reason: longer than 1024 characters");
    }
    ASSIGN_OR_RETURN(rollout::RolloutView view,
                     options_.engine->Pause(request->rollout_id(), request->reason()));
    *response = RolloutToProto(view);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::ResumeRollout(grpc::CallbackServerContext* context,
                                                            const v1::ResumeRolloutRequest* request,
                                                            v1::Rollout* response) {
  return AnswerOnPool(options_.pool, context, [=, this]() -> Status {
    ASSIGN_OR_RETURN(rollout::RolloutView view, options_.engine->Resume(request->rollout_id()));
    *response = RolloutToProto(view);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RolloutServiceImpl::RollbackRollout(
    grpc::CallbackServerContext* context, const v1::RollbackRolloutRequest* request,
    v1::Rollout* response) {
  return AnswerOnPool(options_.pool, context, [=, this]() -> Status {
    ASSIGN_OR_RETURN(rollout::RolloutView view, options_.engine->Rollback(request->rollout_id()));
    *response = RolloutToProto(view);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::BudgetAssignment>* RolloutServiceImpl::WatchBudgets(
    grpc::CallbackServerContext* context, const v1::WatchBudgetsRequest* request) {
  Status checked = CheckNodeId(request->node_id());
  if (checked.ok()) checked = CheckModelHash(request->model_hash(), "model_hash");
  if (checked.ok()) checked = CheckVersion(request->held_version(), "held_version", true);
  if (checked.ok()) checked = CheckNode(*context, request->node_id());
  if (!checked.ok()) return new RefusedStream(ToGrpcStatus(checked));
  auto stream = std::make_shared<NodeStream>(this, *request);
  {
    std::lock_guard lock(mu_);
    if (shut_down_) {
      return new RefusedStream(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
    }
    if (streams_.size() >= options_.max_streams) {
      return new RefusedStream(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       Cat(options_.max_streams, " WatchBudgets streams are open; retry later")));
    }
    streams_.emplace(stream.get(), stream);
  }
  // The engine may write to the store (a node joining a stage): off gRPC's threads.
  auto watch = [this, stream, request = *request] {
    Status s = options_.engine->Watch(request.node_id(), request.model_hash(),
                                      request.held_version(), stream);
    if (!s.ok()) stream->Close(ToGrpcStatus(s));
    // The client may have gone before the engine registered the stream: OnDone's Unwatch then
    // found nothing to undo.
    if (stream->done())
      options_.engine->Unwatch(request.node_id(), request.model_hash(), stream.get());
  };
  if (options_.pool == nullptr) {
    watch();
  } else {
    options_.pool->Submit(std::move(watch));
  }
  return stream.get();
}

grpc::ServerUnaryReactor* RolloutServiceImpl::ReportBudget(grpc::CallbackServerContext* context,
                                                           const v1::ReportBudgetRequest* request,
                                                           v1::ReportBudgetResponse* /*response*/) {
  Status checked = CheckNodeId(request->node_id());
  if (checked.ok()) checked = CheckModelHash(request->model_hash(), "model_hash");
  if (checked.ok()) checked = CheckVersion(request->version(), "version", /*optional=*/true);
  if (checked.ok() && request->error().size() > 4096) {
    checked = absl::InvalidArgumentError("error: longer than 4096 characters");
  }
  if (checked.ok()) checked = CheckNode(*context, request->node_id());
  if (!checked.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(checked));
    return reactor;
  }
  return AnswerOnPool(options_.pool, context, [=, this] {
    return options_.engine->Report(BudgetReportFromProto(*request));
  });
}

}  // namespace ripplekv::scheduler::service
