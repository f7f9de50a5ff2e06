#include "scheduler/rollout/rollout_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "base/strings.h"
#include "scheduler/rollout/node_order.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"

namespace ripplekv::scheduler::rollout {
namespace {

using store::NodeMapState;
using store::RolloutNodeRecord;
using store::RolloutRecord;
using store::RolloutStage;
using store::RolloutState;

constexpr std::string_view kIdPrefix = "r";
constexpr size_t kMaxErrorBytes = 512;

std::string FormatRolloutId(uint64_t id) { return Cat(kIdPrefix, id); }

StatusOr<uint64_t> ParseRolloutId(const std::string& text) {
  uint64_t id = 0;
  const bool digits = text.size() > kIdPrefix.size() && text.size() <= kIdPrefix.size() + 19 &&
                      text.starts_with(kIdPrefix) &&
                      std::all_of(text.begin() + kIdPrefix.size(), text.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (digits) id = std::stoull(text.substr(kIdPrefix.size()));
  if (id == 0) {
    return absl::InvalidArgumentError(
        Cat("rollout_id: \"", text.substr(0, 64), "\" is not a rollout id (r1, r2, ...)"));
  }
  return id;
}

// The first `max_bytes` bytes of `text`, cut back to a character boundary (UTF-8).
std::string Truncated(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

bool Active(const RolloutRecord& r) {
  return r.state == RolloutState::kRunning || r.state == RolloutState::kPaused;
}

std::string StageName(const RolloutRecord& r) {
  const RolloutStage& s = r.stages[r.stage];
  return Cat("stage ", r.stage + 1, "/", r.stages.size(), " (",
             s.nodes ? Cat(*s.nodes, " nodes") : Cat(s.percent.value_or(0), "%"), ")");
}

Status CheckStages(const RolloutRequest& request) {
  if (request.stages.size() > static_cast<size_t>(kMaxStages)) {
    return absl::InvalidArgumentError(
        Cat("stages: ", request.stages.size(), " stages, at most ", kMaxStages));
  }
  int32_t last_nodes = 0;
  double last_percent = 0;
  for (size_t i = 0; i < request.stages.size(); ++i) {
    const RolloutStage& s = request.stages[i];
    const std::string field = Cat("stages[", i, "]");
    if (s.nodes) {
      if (*s.nodes <= last_nodes) {
        return absl::InvalidArgumentError(Cat(field, ".nodes: ", *s.nodes, " must be >= 1 and ",
                                              "larger than the stages' before it"));
      }
      last_nodes = *s.nodes;
    } else if (s.percent) {
      if (!(*s.percent > last_percent && *s.percent <= 100)) {
        return absl::InvalidArgumentError(Cat(field, ".percent: ", *s.percent,
                                              " must be in (0, 100] and larger than the ",
                                              "stages' before it"));
      }
      last_percent = *s.percent;
    } else {
      return absl::InvalidArgumentError(Cat(field, ": set nodes or percent"));
    }
  }
  const RolloutStage& last = request.stages.back();
  if (!(last.percent && *last.percent == 100)) {
    return absl::InvalidArgumentError(
        Cat("stages[", request.stages.size() - 1, "]: the last stage must be 100% (every node)"));
  }
  return absl::OkStatus();
}

RolloutRequest WithDefaults(RolloutRequest request) {
  if (request.stages.empty()) {
    request.stages.push_back({.nodes = 1});
    for (double p : {10.0, 50.0, 100.0}) request.stages.push_back({.percent = p});
  }
  if (!request.stage_timeout_ms) request.stage_timeout_ms = kDefaultStageTimeoutMs;
  if (!request.min_ack_share) request.min_ack_share = 1.0;
  return request;
}

}  // namespace

RolloutEngine::RolloutEngine(store::Store* store, RolloutEngineOptions options)
    : store_(store), options_(std::move(options)) {}

int64_t RolloutEngine::Now() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename Body>
auto RolloutEngine::Locked(Body body) -> decltype(body()) {
  Outbox out;
  auto result = [&] {
    std::lock_guard lock(mu_);
    auto r = body();
    out = std::exchange(outbox_, {});
    return r;
  }();
  for (const auto& sink : out.replaced) sink->Replace();
  for (const auto& [sink, assignment, sequence] : out.offers) sink->Offer(assignment, sequence);
  return result;
}

StatusOr<std::unique_ptr<RolloutEngine>> RolloutEngine::Load(store::Store* store,
                                                             RolloutEngineOptions options) {
  std::unique_ptr<RolloutEngine> engine(new RolloutEngine(store, std::move(options)));
  ASSIGN_OR_RETURN(std::vector<RolloutRecord> records, store->ListRollouts());
  for (RolloutRecord& record : records) {
    Run run;
    run.id = record.id;
    run.rollout_id = FormatRolloutId(record.id);
    run.state = std::move(record);
    Model& model = engine->models_[run.state.model_hash];
    model.newest = std::max(model.newest, run.id);
    engine->runs_.emplace(run.id, std::move(run));
  }
  for (auto& [hash, model] : engine->models_) {
    Run& run = engine->runs_.at(model.newest);
    ASSIGN_OR_RETURN(std::vector<RolloutNodeRecord> nodes, store->ListRolloutNodes(run.id));
    for (RolloutNodeRecord& node : nodes) {
      std::string node_id = node.node_id;
      run.nodes.emplace(std::move(node_id), std::move(node));
    }
    if (Active(run.state)) {
      spdlog::info("rollout {} of model {} resumes in {} ({})", run.rollout_id, hash.substr(0, 12),
                   StageName(run.state),
                   run.state.state == RolloutState::kPaused ? "paused" : "running");
    }
  }
  return engine;
}

std::shared_ptr<const MapVersion> RolloutEngine::MapFor(const std::string& model_hash,
                                                        const std::string& version) {
  const std::string key = Cat(model_hash, "/", version);
  if (auto it = maps_.find(key); it != maps_.end()) return it->second;
  StatusOr<store::BudgetMapRecord> record = store_->GetBudgetMapByDigest(model_hash, version);
  if (!record.ok()) return nullptr;
  StatusOr<MapVersion> map = ReadMapVersion(*std::move(record));
  if (!map.ok()) {
    spdlog::error("{}", std::string(map.status().message()));
    return nullptr;
  }
  auto shared = std::make_shared<const MapVersion>(*std::move(map));
  maps_.emplace(key, shared);
  return shared;
}

StatusOr<RolloutEngine::Run*> RolloutEngine::FindRun(const std::string& rollout_id) {
  ASSIGN_OR_RETURN(const Run* run, std::as_const(*this).FindRun(rollout_id));
  return const_cast<Run*>(run);
}

StatusOr<const RolloutEngine::Run*> RolloutEngine::FindRun(const std::string& rollout_id) const {
  ASSIGN_OR_RETURN(uint64_t id, ParseRolloutId(rollout_id));
  auto it = runs_.find(id);
  if (it == runs_.end()) return absl::NotFoundError(Cat("no rollout ", rollout_id));
  return &it->second;
}

Assignment RolloutEngine::AssignmentFor(const Model& model, const std::string& node_id) const {
  Assignment a;
  if (model.newest == 0) return a;
  const Run& run = runs_.at(model.newest);
  const RolloutRecord& r = run.state;
  a.model_hash = r.model_hash;
  a.rollout_id = run.rollout_id;
  switch (r.state) {
    case RolloutState::kSucceeded:
      a.version = r.map_version;
      break;
    case RolloutState::kRolledBack:
      a.version = r.previous_version;
      break;
    default: {
      auto it = run.nodes.find(node_id);
      const bool in = it != run.nodes.end() && it->second.in_rollout;
      a.version = in ? r.map_version : r.previous_version;
    }
  }
  return a;
}

void RolloutEngine::OfferChanges(const std::string& model_hash, Model& model) {
  for (auto& [node_id, node] : model.nodes) {
    if (!node.sink) continue;
    Assignment a = AssignmentFor(model, node_id);
    if (node.offered && *node.offered == a.version) continue;
    if (!a.version.empty()) {
      a.map = MapFor(model_hash, a.version);
      if (a.map == nullptr) {
        spdlog::error("map {} of model {} is assigned but cannot be read; node {} not told",
                      a.version, model_hash.substr(0, 12), node_id);
        continue;
      }
    }
    node.offered = a.version;
    outbox_.offers.emplace_back(node.sink, std::move(a), ++offer_sequence_);
  }
}

Status RolloutEngine::Persist(Run& run, const std::vector<std::string>& changed, bool sync) {
  std::vector<RolloutNodeRecord> records;
  records.reserve(changed.size());
  for (const std::string& node_id : changed) records.push_back(run.nodes.at(node_id));
  return store_->WriteRollout(run.id, sync ? &run.state : nullptr, records, sync);
}

StatusOr<RolloutView> RolloutEngine::Create(const RolloutRequest& raw) {
  const RolloutRequest request = WithDefaults(raw);
  RETURN_IF_ERROR(CheckStages(request));
  if (request.soak_ms < 0) return absl::InvalidArgumentError("soak: must be >= 0");
  if (*request.stage_timeout_ms <= 0) {
    return absl::InvalidArgumentError("stage_timeout: must be > 0");
  }
  if (!(*request.min_ack_share > 0 && *request.min_ack_share <= 1)) {
    return absl::InvalidArgumentError(
        Cat("min_ack_share: ", *request.min_ack_share, " must be in (0, 1]"));
  }
  if (request.map_version.empty()) return absl::InvalidArgumentError("map_version is required");
  return Locked([&] { return CreateLocked(request); });
}

StatusOr<RolloutView> RolloutEngine::CreateLocked(const RolloutRequest& request) {
  if (MapFor(request.model_hash, request.map_version) == nullptr) {
    return absl::NotFoundError(Cat("model ", request.model_hash, " has no budget map version ",
                                   request.map_version.substr(0, 64)));
  }
  Model& model = models_[request.model_hash];
  std::string previous;
  if (model.newest != 0) {
    const Run& newest = runs_.at(model.newest);
    if (Active(newest.state)) {
      return absl::FailedPreconditionError(
          Cat("rollout ", newest.rollout_id, " of this model is ",
              newest.state.state == RolloutState::kPaused ? "paused" : "running",
              "; roll it back or let it finish first"));
    }
    previous = newest.state.state == RolloutState::kSucceeded ? newest.state.map_version
                                                              : newest.state.previous_version;
  }
  if (previous == request.map_version) {
    return absl::FailedPreconditionError(
        Cat("map ", previous, " is already the model's active map"));
  }
  const int64_t now = Now();
  const RolloutRecord wanted = {
      .model_hash = request.model_hash,
      .map_version = request.map_version,
      .previous_version = previous,
      .stages = request.stages,
      .soak_ms = request.soak_ms,
      .stage_timeout_ms = *request.stage_timeout_ms,
      .min_ack_share = *request.min_ack_share,
      .state = RolloutState::kRunning,
      .stage = 0,
      .created_at_ms = now,
      .updated_at_ms = now,
      .stage_started_at_ms = now,
  };
  Run run;
  ASSIGN_OR_RETURN(run.state, store_->CreateRollout(wanted));
  run.id = run.state.id;
  run.rollout_id = FormatRolloutId(run.id);
  // The superseded rollout's node records stay in the store; only the newest is kept here.
  if (model.newest != 0) runs_.at(model.newest).nodes.clear();
  model.newest = run.id;
  Run& stored = runs_.emplace(run.id, std::move(run)).first->second;
  spdlog::info("rollout {} of model {} started: map {} (previous {})", stored.rollout_id,
               stored.state.model_hash.substr(0, 12), stored.state.map_version,
               previous.empty() ? "none" : previous);
  Step(stored);
  return View(stored, /*with_nodes=*/false);
}

void RolloutEngine::Step(Run& run) {
  Model& model = models_[run.state.model_hash];
  RolloutRecord& r = run.state;
  const telemetry::ScopedLogIds ids({.rollout = run.rollout_id});
  const int64_t now = Now();
  bool moved = false;
  while (r.state == RolloutState::kRunning) {
    // 1. Cover the stage: add connected nodes in rank order until it has its size.
    std::vector<std::pair<uint64_t, const std::string*>> candidates;
    size_t connected = 0;
    size_t members = 0;  // connected or not: a member stays one when its stream ends
    for (const auto& [node_id, node] : run.nodes) members += node.in_rollout ? 1 : 0;
    for (auto& [node_id, node] : model.nodes) {
      auto it = run.nodes.find(node_id);
      const bool in = it != run.nodes.end() && it->second.in_rollout;
      if (!node.sink) continue;
      ++connected;
      if (in) continue;
      auto [rank, fresh] = run.ranks.try_emplace(node_id, 0);
      if (fresh) rank->second = NodeRank(run.rollout_id, node_id);
      candidates.emplace_back(rank->second, &node_id);
    }
    const size_t size = StageSize(r.stages[r.stage], connected);
    std::vector<std::string> added;
    if (members < size) {
      const size_t want = std::min(size - members, candidates.size());
      std::partial_sort(candidates.begin(), candidates.begin() + want, candidates.end());
      for (size_t i = 0; i < want; ++i) {
        const std::string& node_id = *candidates[i].second;
        const std::string& held = model.nodes.at(node_id).held_version;
        run.nodes[node_id] = {
            .node_id = node_id,
            .in_rollout = true,
            .assigned_version = r.map_version,
            .held_version = held,
            .state = held == r.map_version ? NodeMapState::kApplied : NodeMapState::kPending,
            .updated_at_ms = now,
        };
        added.push_back(node_id);
      }
      members += want;
    }
    // 2. Is the stage done?
    size_t acked = 0;
    for (const auto& [node_id, node] : run.nodes) {
      if (node.in_rollout && node.state == NodeMapState::kApplied) ++acked;
    }
    const bool covered = size >= 1 && members >= size;
    const bool acknowledged =
        covered && static_cast<double>(acked) >=
                       std::ceil(r.min_ack_share * static_cast<double>(members) - 1e-9);
    bool advance = false;
    if (acknowledged) {
      if (run.acked_since_ms == 0) run.acked_since_ms = now;
      advance = now - run.acked_since_ms >= r.soak_ms;
    } else {
      run.acked_since_ms = 0;
    }
    if (!added.empty()) {
      r.updated_at_ms = now;
      if (Status s = Persist(run, added, /*sync=*/true); !s.ok()) {
        // Nobody is told: the nodes were not durably added, so forget them and try again later.
        spdlog::error("rollout {}: could not record new nodes: {}", run.rollout_id, s.ToString());
        for (const std::string& node_id : added) run.nodes.erase(node_id);
        break;
      }
      moved = true;
    }
    if (advance) {
      const bool last = static_cast<size_t>(r.stage) + 1 == r.stages.size();
      if (last) {
        r.state = RolloutState::kSucceeded;
      } else {
        ++r.stage;
        r.stage_started_at_ms = now;
      }
      run.acked_since_ms = 0;
      r.updated_at_ms = now;
      if (Status s = Persist(run, {}, /*sync=*/true); !s.ok()) {
        spdlog::error("rollout {}: could not record the stage change: {}", run.rollout_id,
                      s.ToString());
        // Back to the stage it was in; the next tick tries again.
        if (last) {
          r.state = RolloutState::kRunning;
        } else {
          --r.stage;
        }
        break;
      }
      spdlog::info("rollout {}: {}", run.rollout_id,
                   last ? std::string("succeeded") : Cat("now in ", StageName(r)));
      moved = true;
      continue;  // the next stage may be done at once (zero soak)
    }
    if (!acknowledged && now - r.stage_started_at_ms >= r.stage_timeout_ms) {
      const std::string reason =
          size == 0
              ? Cat(StageName(r), ": no node of the model connected within the stage ", "timeout")
              : Cat(StageName(r), ": ", acked, " of ", members,
                    " nodes acknowledged the map within the stage timeout (",
                    r.stage_timeout_ms / 1000.0, " s); ",
                    static_cast<int64_t>(std::ceil(r.min_ack_share * members - 1e-9)), " required");
      if (PauseLocked(run, reason).ok()) moved = true;
    }
    break;
  }
  if (moved) OfferChanges(r.model_hash, model);
}

Status RolloutEngine::PauseLocked(Run& run, const std::string& reason) {
  RolloutRecord& r = run.state;
  const RolloutRecord before = r;
  r.state = RolloutState::kPaused;
  r.pause_reason = reason;
  r.updated_at_ms = Now();
  if (Status s = Persist(run, {}, /*sync=*/true); !s.ok()) {
    r = before;
    return s;
  }
  spdlog::warn("rollout {} paused: {}", run.rollout_id, reason);
  return absl::OkStatus();
}

StatusOr<RolloutView> RolloutEngine::Pause(const std::string& rollout_id,
                                           const std::string& reason) {
  return Locked([&]() -> StatusOr<RolloutView> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    switch (run->state.state) {
      case RolloutState::kPaused:
        return View(*run, false);
      case RolloutState::kRunning:
        RETURN_IF_ERROR(PauseLocked(*run, reason.empty() ? "paused by operator" : reason));
        return View(*run, false);
      default:
        return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " has ended"));
    }
  });
}

StatusOr<RolloutView> RolloutEngine::Resume(const std::string& rollout_id) {
  return Locked([&]() -> StatusOr<RolloutView> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    RolloutRecord& r = run->state;
    if (r.state != RolloutState::kPaused) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " is not paused"));
    }
    const RolloutRecord before = r;
    const int64_t now = Now();
    r.state = RolloutState::kRunning;
    r.pause_reason.clear();
    r.stage_started_at_ms = now;
    r.updated_at_ms = now;
    // Nodes that failed get the map again (their agents retry on a new offer).
    std::vector<std::string> retried;
    for (auto& [node_id, node] : run->nodes) {
      if (node.in_rollout && node.state == NodeMapState::kFailed) {
        node.state = NodeMapState::kPending;
        node.error.clear();
        retried.push_back(node_id);
      }
    }
    if (Status s = Persist(*run, retried, /*sync=*/true); !s.ok()) {
      r = before;
      return s;
    }
    Model& model = models_[r.model_hash];
    for (const std::string& node_id : retried) {
      if (auto it = model.nodes.find(node_id); it != model.nodes.end()) it->second.offered.reset();
    }
    spdlog::info("rollout {} resumed in {}", rollout_id, StageName(r));
    run->acked_since_ms = 0;
    Step(*run);
    OfferChanges(r.model_hash, model);
    return View(*run, false);
  });
}

StatusOr<RolloutView> RolloutEngine::Rollback(const std::string& rollout_id) {
  return Locked([&]() -> StatusOr<RolloutView> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    RolloutRecord& r = run->state;
    Model& model = models_[r.model_hash];
    if (model.newest != run->id) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " was superseded by ",
                                               FormatRolloutId(model.newest),
                                               "; roll back that one"));
    }
    if (r.state == RolloutState::kRolledBack) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " is rolled back already"));
    }
    const RolloutRecord before = r;
    const int64_t now = Now();
    r.state = RolloutState::kRolledBack;
    r.updated_at_ms = now;
    std::vector<std::string> changed;
    for (auto& [node_id, node] : run->nodes) {
      if (node.assigned_version != r.map_version) continue;
      node.assigned_version = r.previous_version;
      node.state =
          node.held_version == r.previous_version ? NodeMapState::kApplied : NodeMapState::kPending;
      node.error.clear();
      node.updated_at_ms = now;
      changed.push_back(node_id);
    }
    if (Status s = Persist(*run, changed, /*sync=*/true); !s.ok()) {
      r = before;
      return s;  // nodes keep their records in memory too: the store has them as before
    }
    spdlog::warn("rollout {} rolled back to {} on {} nodes", rollout_id,
                 r.previous_version.empty() ? "no map" : r.previous_version, changed.size());
    OfferChanges(r.model_hash, model);
    return View(*run, false);
  });
}

Status RolloutEngine::Watch(const std::string& node_id, const std::string& model_hash,
                            const std::string& held_version, std::shared_ptr<AssignmentSink> sink) {
  return Locked([&] { return WatchLocked(node_id, model_hash, held_version, std::move(sink)); });
}

Status RolloutEngine::WatchLocked(const std::string& node_id, const std::string& model_hash,
                                  const std::string& held_version,
                                  std::shared_ptr<AssignmentSink> sink) {
  if (!models_.contains(model_hash) && !KnownModel(model_hash)) {
    return absl::NotFoundError(
        Cat("model ", model_hash, " is unknown: it has no profile, budget map or rollout"));
  }
  Model& model = models_[model_hash];
  Node& node = model.nodes[node_id];
  if (node.sink) outbox_.replaced.push_back(std::move(node.sink));
  node.sink = std::move(sink);
  node.offered.reset();
  node.held_version = held_version;
  if (model.newest != 0) {
    Run& run = runs_.at(model.newest);
    auto it = run.nodes.find(node_id);
    if (it != run.nodes.end() && it->second.held_version != held_version) {
      RolloutNodeRecord& record = it->second;
      record.held_version = held_version;
      if (held_version == record.assigned_version) {
        record.state = NodeMapState::kApplied;
        record.error.clear();
      }
      record.updated_at_ms = Now();
      if (Status s = Persist(run, {node_id}, /*sync=*/false); !s.ok()) {
        spdlog::warn("rollout {}: node {}: {}", run.rollout_id, node_id, s.ToString());
      }
    }
    Step(run);
  }
  OfferChanges(model_hash, model);
  return absl::OkStatus();
}

void RolloutEngine::Unwatch(const std::string& node_id, const std::string& model_hash,
                            const AssignmentSink* sink) {
  std::lock_guard lock(mu_);
  auto model = models_.find(model_hash);
  if (model == models_.end()) return;
  auto node = model->second.nodes.find(node_id);
  if (node == model->second.nodes.end() || node->second.sink.get() != sink) return;
  // What the node holds is stated again by its next stream; its rollout record (the newest
  // rollout's run.nodes) is what a rollout in progress counts, and it stays.
  model->second.nodes.erase(node);
  if (model->second.nodes.empty() && model->second.newest == 0) models_.erase(model);
}

bool RolloutEngine::KnownModel(const std::string& model_hash) const {
  if (store_->GetProfile(model_hash).ok()) return true;
  StatusOr<std::vector<store::BudgetMapRecord>> maps = store_->ListBudgetMaps(model_hash);
  return maps.ok() && !maps->empty();
}

size_t RolloutEngine::tracked_nodes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [hash, model] : models_) n += model.nodes.size();
  return n;
}

size_t RolloutEngine::tracked_models() const {
  std::lock_guard lock(mu_);
  return models_.size();
}

Status RolloutEngine::Report(const BudgetReport& report) {
  return Locked([&] { return ReportLocked(report); });
}

Status RolloutEngine::ReportLocked(const BudgetReport& report) {
  auto model_it = models_.find(report.model_hash);
  const auto recorded = [&](const Model& model) {
    return model.newest != 0 && runs_.at(model.newest).nodes.contains(report.node_id);
  };
  if (model_it == models_.end() ||
      (!model_it->second.nodes.contains(report.node_id) && !recorded(model_it->second))) {
    return absl::FailedPreconditionError(Cat("node ", report.node_id, " has not watched model ",
                                             report.model_hash, "; open WatchBudgets first"));
  }
  Model& model = model_it->second;
  if (auto it = model.nodes.find(report.node_id); report.ok && it != model.nodes.end()) {
    it->second.held_version = report.version;
  }
  if (model.newest == 0) return absl::OkStatus();
  Run& run = runs_.at(model.newest);
  const Assignment assigned = AssignmentFor(model, report.node_id);
  const int64_t now = Now();
  RolloutNodeRecord& node = run.nodes[report.node_id];
  node.node_id = report.node_id;
  node.assigned_version = assigned.version;
  if (report.ok) node.held_version = report.version;
  if (report.version == assigned.version) {
    node.state = report.ok ? NodeMapState::kApplied : NodeMapState::kFailed;
    node.error = report.ok ? std::string() : Truncated(report.error, kMaxErrorBytes);
  }
  node.updated_at_ms = now;
  const bool failed_member = !report.ok && node.in_rollout &&
                             report.version == run.state.map_version &&
                             run.state.state == RolloutState::kRunning;
  RETURN_IF_ERROR(Persist(run, {report.node_id}, /*sync=*/false));
  if (failed_member) {
    RETURN_IF_ERROR(PauseLocked(run, Cat("node ", report.node_id, " failed to apply map ",
                                         report.version, ": ", node.error)));
  }
  Step(run);
  return absl::OkStatus();
}

void RolloutEngine::Tick() {
  Locked([&] {
    for (auto& [hash, model] : models_) {
      if (model.newest == 0) continue;
      Run& run = runs_.at(model.newest);
      if (run.state.state == RolloutState::kRunning) Step(run);
    }
    return 0;
  });
}

StatusOr<RolloutView> RolloutEngine::Get(const std::string& rollout_id, bool with_nodes) const {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(const Run* run, FindRun(rollout_id));
  if (with_nodes && run->nodes.empty()) {
    // A superseded rollout: its node records are in the store only.
    Run copy = *run;
    ASSIGN_OR_RETURN(std::vector<RolloutNodeRecord> records, store_->ListRolloutNodes(run->id));
    for (RolloutNodeRecord& record : records) {
      std::string node_id = record.node_id;
      copy.nodes.emplace(std::move(node_id), std::move(record));
    }
    return View(copy, true);
  }
  return View(*run, with_nodes);
}

std::vector<RolloutView> RolloutEngine::List(const std::string& model_hash) const {
  std::lock_guard lock(mu_);
  std::vector<RolloutView> out;
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) {
    if (model_hash.empty() || it->second.state.model_hash == model_hash) {
      out.push_back(View(it->second, false));
    }
  }
  return out;
}

RolloutView RolloutEngine::View(const Run& run, bool with_nodes) const {
  RolloutView out{.rollout_id = run.rollout_id, .record = run.state};
  const RolloutRecord& r = run.state;
  auto model_it = models_.find(r.model_hash);
  const Model* model = model_it == models_.end() ? nullptr : &model_it->second;
  const bool newest = model != nullptr && model->newest == run.id;
  if (model != nullptr) {
    for (const auto& [id, node] : model->nodes) out.connected_nodes += node.sink ? 1 : 0;
  }
  for (const auto& [node_id, node] : run.nodes) {
    if (!node.in_rollout) continue;
    ++out.stage_nodes;
    switch (node.state) {
      case NodeMapState::kApplied:
        ++out.acknowledged;
        break;
      case NodeMapState::kFailed:
        ++out.failed;
        break;
      default:
        ++out.pending;
    }
  }
  if (r.state == RolloutState::kRunning && run.acked_since_ms != 0) {
    out.soak_left_ms = std::max<int64_t>(0, r.soak_ms - (Now() - run.acked_since_ms));
  }
  if (with_nodes) {
    std::map<std::string, NodeView> nodes;
    for (const auto& [node_id, node] : run.nodes) nodes[node_id].record = node;
    if (newest) {
      for (const auto& [node_id, node] : model->nodes) {
        auto [it, fresh] = nodes.try_emplace(node_id);
        NodeView& view = it->second;
        if (fresh) {  // connected, never recorded: holds the previous map
          view.record.node_id = node_id;
          view.record.assigned_version = AssignmentFor(*model, node_id).version;
          view.record.held_version = node.held_version;
          view.record.state = node.held_version == view.record.assigned_version
                                  ? NodeMapState::kApplied
                                  : NodeMapState::kPending;
        }
        view.connected = node.sink != nullptr;
      }
    }
    out.nodes.reserve(nodes.size());
    for (auto& [node_id, node] : nodes) out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace ripplekv::scheduler::rollout
