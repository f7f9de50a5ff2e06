#include "scheduler/service/rollout_engine.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "base/strings.h"
#include "scheduler/service/budget_versions.h"
#include "scheduler/service/node_order.h"
#include "spdlog/spdlog.h"
#include "telemetry/logging.h"

namespace ripplekv::scheduler::rollout {
namespace {

using google::protobuf::util::TimeUtil;

constexpr std::string_view kIdPrefix = "r";

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

bool Active(const v1::Rollout& r) {
  return r.state() == v1::ROLLOUT_STATE_RUNNING || r.state() == v1::ROLLOUT_STATE_PAUSED;
}

int64_t Ms(const google::protobuf::Duration& d) { return TimeUtil::DurationToMilliseconds(d); }

google::protobuf::Timestamp Stamp(int64_t ms) { return TimeUtil::MillisecondsToTimestamp(ms); }

std::string StageName(const v1::Rollout& r) {
  const v1::RolloutStage& s = r.stages(r.stage());
  return Cat(
      "stage ", r.stage() + 1, "/", r.stages_size(), " (",
      s.size_case() == v1::RolloutStage::kNodes ? Cat(s.nodes(), " nodes") : Cat(s.percent(), "%"),
      ")");
}

Status CheckStages(const v1::CreateRolloutRequest& request) {
  if (request.stages_size() > kMaxStages) {
    return absl::InvalidArgumentError(
        Cat("stages: ", request.stages_size(), " stages, at most ", kMaxStages));
  }
  int32_t last_nodes = 0;
  double last_percent = 0;
  for (int i = 0; i < request.stages_size(); ++i) {
    const v1::RolloutStage& s = request.stages(i);
    const std::string field = Cat("stages[", i, "]");
    switch (s.size_case()) {
      case v1::RolloutStage::kNodes:
        if (s.nodes() <= last_nodes) {
          return absl::InvalidArgumentError(Cat(field, ".nodes: ", s.nodes(), " must be >= 1 and ",
                                                "larger than the stages' before it"));
        }
        last_nodes = s.nodes();
        break;
      case v1::RolloutStage::kPercent:
        if (!(s.percent() > last_percent && s.percent() <= 100)) {
          return absl::InvalidArgumentError(Cat(field, ".percent: ", s.percent(),
                                                " must be in (0, 100] and larger than the ",
                                                "stages' before it"));
        }
        last_percent = s.percent();
        break;
      default:
        return absl::InvalidArgumentError(Cat(field, ": set nodes or percent"));
    }
  }
  const v1::RolloutStage& last = request.stages(request.stages_size() - 1);
  if (!(last.size_case() == v1::RolloutStage::kPercent && last.percent() == 100)) {
    return absl::InvalidArgumentError(
        Cat("stages[", request.stages_size() - 1, "]: the last stage must be 100% (every node)"));
  }
  return absl::OkStatus();
}

v1::CreateRolloutRequest WithDefaults(v1::CreateRolloutRequest request) {
  if (request.stages().empty()) {
    request.add_stages()->set_nodes(1);
    for (double p : {10.0, 50.0, 100.0}) request.add_stages()->set_percent(p);
  }
  if (!request.has_stage_timeout()) {
    *request.mutable_stage_timeout() = TimeUtil::MillisecondsToDuration(kDefaultStageTimeoutMs);
  }
  if (!request.has_min_ack_share()) request.set_min_ack_share(1.0);
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
  ASSIGN_OR_RETURN(std::vector<store::RolloutRecord> records, store->ListRollouts());
  for (const store::RolloutRecord& record : records) {
    Run run;
    run.id = record.id;
    if (!run.state.ParseFromString(record.value)) {
      return absl::DataLossError(Cat("rollout ", FormatRolloutId(record.id), " does not decode"));
    }
    run.state.set_rollout_id(FormatRolloutId(record.id));
    Model& model = engine->models_[run.state.model_hash()];
    model.newest = std::max(model.newest, record.id);
    engine->runs_.emplace(record.id, std::move(run));
  }
  for (auto& [hash, model] : engine->models_) {
    Run& run = engine->runs_.at(model.newest);
    ASSIGN_OR_RETURN(std::vector<store::RolloutNodeRecord> nodes, store->ListRolloutNodes(run.id));
    for (const store::RolloutNodeRecord& record : nodes) {
      v1::RolloutNode node;
      if (!node.ParseFromString(record.value)) {
        return absl::DataLossError(
            Cat("rollout ", run.state.rollout_id(), " node ", record.node_id, " does not decode"));
      }
      run.nodes.emplace(record.node_id, std::move(node));
    }
    if (Active(run.state)) {
      spdlog::info("rollout {} of model {} resumes in {} ({})", run.state.rollout_id(),
                   hash.substr(0, 12), StageName(run.state),
                   run.state.state() == v1::ROLLOUT_STATE_PAUSED ? "paused" : "running");
    }
  }
  return engine;
}

const v1::BudgetMapVersion* RolloutEngine::MapFor(const std::string& model_hash,
                                                  const std::string& version) {
  const std::string key = Cat(model_hash, "/", version);
  if (auto it = maps_.find(key); it != maps_.end()) return &it->second;
  StatusOr<store::BudgetMapRecord> record = store_->GetBudgetMapByDigest(model_hash, version);
  if (!record.ok()) return nullptr;
  StatusOr<v1::BudgetMapVersion> map = BudgetMapVersionFromRecord(*record, /*full=*/true);
  if (!map.ok()) {
    spdlog::error("{}", std::string(map.status().message()));
    return nullptr;
  }
  return &maps_.emplace(key, *std::move(map)).first->second;
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

v1::BudgetAssignment RolloutEngine::AssignmentFor(const Model& model,
                                                  const std::string& node_id) const {
  v1::BudgetAssignment a;
  if (model.newest == 0) return a;
  const Run& run = runs_.at(model.newest);
  const v1::Rollout& r = run.state;
  a.set_model_hash(r.model_hash());
  a.set_rollout_id(r.rollout_id());
  switch (r.state()) {
    case v1::ROLLOUT_STATE_SUCCEEDED:
      a.set_version(r.map_version());
      break;
    case v1::ROLLOUT_STATE_ROLLED_BACK:
      a.set_version(r.previous_version());
      break;
    default: {
      auto it = run.nodes.find(node_id);
      const bool in = it != run.nodes.end() && it->second.in_rollout();
      a.set_version(in ? r.map_version() : r.previous_version());
    }
  }
  return a;
}

void RolloutEngine::OfferChanges(const std::string& model_hash, Model& model) {
  for (auto& [node_id, node] : model.nodes) {
    if (!node.sink) continue;
    v1::BudgetAssignment a = AssignmentFor(model, node_id);
    if (node.offered && *node.offered == a.version()) continue;
    if (!a.version().empty()) {
      const v1::BudgetMapVersion* map = MapFor(model_hash, a.version());
      if (map == nullptr) {
        spdlog::error("map {} of model {} is assigned but cannot be read; node {} not told",
                      a.version(), model_hash.substr(0, 12), node_id);
        continue;
      }
      *a.mutable_map() = *map;
    }
    node.offered = a.version();
    outbox_.offers.emplace_back(node.sink, std::move(a), ++offer_sequence_);
  }
}

Status RolloutEngine::Persist(Run& run, const std::vector<std::string>& changed, bool sync) {
  std::vector<store::RolloutNodeRecord> records;
  records.reserve(changed.size());
  for (const std::string& node_id : changed) {
    records.push_back({.node_id = node_id, .value = run.nodes.at(node_id).SerializeAsString()});
  }
  std::optional<std::string> value;
  if (sync) {
    v1::Rollout stored = run.state;
    stored.clear_rollout_id();
    value = stored.SerializeAsString();
  }
  return store_->WriteRollout(run.id, value, records, sync);
}

StatusOr<v1::Rollout> RolloutEngine::Create(const v1::CreateRolloutRequest& raw) {
  const v1::CreateRolloutRequest request = WithDefaults(raw);
  RETURN_IF_ERROR(CheckStages(request));
  if (Ms(request.soak()) < 0) return absl::InvalidArgumentError("soak: must be >= 0");
  if (Ms(request.stage_timeout()) <= 0) {
    return absl::InvalidArgumentError("stage_timeout: must be > 0");
  }
  if (!(request.min_ack_share() > 0 && request.min_ack_share() <= 1)) {
    return absl::InvalidArgumentError(
        Cat("min_ack_share: ", request.min_ack_share(), " must be in (0, 1]"));
  }
  if (request.map_version().empty()) return absl::InvalidArgumentError("map_version is required");
  return Locked([&] { return CreateLocked(request); });
}

StatusOr<v1::Rollout> RolloutEngine::CreateLocked(const v1::CreateRolloutRequest& request) {
  if (MapFor(request.model_hash(), request.map_version()) == nullptr) {
    return absl::NotFoundError(Cat("model ", request.model_hash(), " has no budget map version ",
                                   request.map_version().substr(0, 64)));
  }
  Model& model = models_[request.model_hash()];
  std::string previous;
  if (model.newest != 0) {
    const v1::Rollout& newest = runs_.at(model.newest).state;
    if (Active(newest)) {
      return absl::FailedPreconditionError(
          Cat("rollout ", newest.rollout_id(), " of this model is ",
              newest.state() == v1::ROLLOUT_STATE_PAUSED ? "paused" : "running",
              "; roll it back or let it finish first"));
    }
    previous = newest.state() == v1::ROLLOUT_STATE_SUCCEEDED ? newest.map_version()
                                                             : newest.previous_version();
  }
  if (previous == request.map_version()) {
    return absl::FailedPreconditionError(
        Cat("map ", previous, " is already the model's active map"));
  }
  const int64_t now = Now();
  Run run;
  v1::Rollout& r = run.state;
  r.set_model_hash(request.model_hash());
  r.set_map_version(request.map_version());
  r.set_previous_version(previous);
  *r.mutable_stages() = request.stages();
  *r.mutable_soak() = request.soak();
  *r.mutable_stage_timeout() = request.stage_timeout();
  r.set_min_ack_share(request.min_ack_share());
  r.set_state(v1::ROLLOUT_STATE_RUNNING);
  r.set_stage(0);
  *r.mutable_create_time() = Stamp(now);
  *r.mutable_update_time() = Stamp(now);
  *r.mutable_stage_start_time() = Stamp(now);
  ASSIGN_OR_RETURN(store::RolloutRecord record, store_->CreateRollout(r.SerializeAsString()));
  run.id = record.id;
  r.set_rollout_id(FormatRolloutId(record.id));
  // The superseded rollout's node records stay in the store; only the newest is kept here.
  if (model.newest != 0) runs_.at(model.newest).nodes.clear();
  model.newest = run.id;
  Run& stored = runs_.emplace(run.id, std::move(run)).first->second;
  const v1::Rollout& started = stored.state;
  spdlog::info("rollout {} of model {} started: map {} (previous {})", started.rollout_id(),
               started.model_hash().substr(0, 12), started.map_version(),
               previous.empty() ? "none" : previous);
  Step(stored);
  return View(stored, /*with_nodes=*/false);
}

void RolloutEngine::Step(Run& run) {
  Model& model = models_[run.state.model_hash()];
  v1::Rollout& r = run.state;
  const telemetry::ScopedLogIds ids({.rollout = r.rollout_id()});
  const int64_t now = Now();
  bool moved = false;
  while (r.state() == v1::ROLLOUT_STATE_RUNNING) {
    // 1. Cover the stage: add connected nodes in rank order until it has its size.
    std::vector<std::pair<uint64_t, const std::string*>> candidates;
    size_t connected = 0;
    size_t members = 0;  // connected or not: a member stays one when its stream ends
    for (const auto& [node_id, node] : run.nodes) members += node.in_rollout() ? 1 : 0;
    for (auto& [node_id, node] : model.nodes) {
      auto it = run.nodes.find(node_id);
      const bool in = it != run.nodes.end() && it->second.in_rollout();
      if (!node.sink) continue;
      ++connected;
      if (in) continue;
      auto [rank, fresh] = run.ranks.try_emplace(node_id, 0);
      if (fresh) rank->second = NodeRank(r.rollout_id(), node_id);
      candidates.emplace_back(rank->second, &node_id);
    }
    const size_t size = StageSize(r.stages(r.stage()), connected);
    std::vector<std::string> added;
    if (members < size) {
      const size_t want = std::min(size - members, candidates.size());
      std::partial_sort(candidates.begin(), candidates.begin() + want, candidates.end());
      for (size_t i = 0; i < want; ++i) {
        const std::string& node_id = *candidates[i].second;
        v1::RolloutNode& node = run.nodes[node_id];
        node.set_node_id(node_id);
        node.set_in_rollout(true);
        node.set_assigned_version(r.map_version());
        const std::string& held = model.nodes.at(node_id).held_version;
        node.set_held_version(held);
        node.set_state(held == r.map_version() ? v1::NODE_MAP_STATE_APPLIED
                                               : v1::NODE_MAP_STATE_PENDING);
        node.clear_error();
        *node.mutable_update_time() = Stamp(now);
        added.push_back(node_id);
      }
      members += want;
    }
    // 2. Is the stage done?
    size_t acked = 0;
    for (const auto& [node_id, node] : run.nodes) {
      if (node.in_rollout() && node.state() == v1::NODE_MAP_STATE_APPLIED) ++acked;
    }
    const bool covered = size >= 1 && members >= size;
    const bool acknowledged =
        covered && static_cast<double>(acked) >=
                       std::ceil(r.min_ack_share() * static_cast<double>(members) - 1e-9);
    const int64_t stage_start = TimeUtil::TimestampToMilliseconds(r.stage_start_time());
    bool advance = false;
    if (acknowledged) {
      if (run.acked_since_ms == 0) run.acked_since_ms = now;
      advance = now - run.acked_since_ms >= Ms(r.soak());
    } else {
      run.acked_since_ms = 0;
    }
    if (!added.empty()) {
      *r.mutable_update_time() = Stamp(now);
      if (Status s = Persist(run, added, /*sync=*/true); !s.ok()) {
        // Nobody is told: the nodes were not durably added, so forget them and try again later.
        spdlog::error("rollout {}: could not record new nodes: {}", r.rollout_id(), s.ToString());
        for (const std::string& node_id : added) run.nodes.erase(node_id);
        break;
      }
      moved = true;
    }
    if (advance) {
      const bool last = r.stage() + 1 == r.stages_size();
      if (last) {
        r.set_state(v1::ROLLOUT_STATE_SUCCEEDED);
      } else {
        r.set_stage(r.stage() + 1);
        *r.mutable_stage_start_time() = Stamp(now);
      }
      run.acked_since_ms = 0;
      *r.mutable_update_time() = Stamp(now);
      if (Status s = Persist(run, {}, /*sync=*/true); !s.ok()) {
        spdlog::error("rollout {}: could not record the stage change: {}", r.rollout_id(),
                      s.ToString());
        // Back to the stage it was in; the next tick tries again.
        if (last) {
          r.set_state(v1::ROLLOUT_STATE_RUNNING);
        } else {
          r.set_stage(r.stage() - 1);
        }
        break;
      }
      spdlog::info("rollout {}: {}", r.rollout_id(),
                   last ? std::string("succeeded") : Cat("now in ", StageName(r)));
      moved = true;
      continue;  // the next stage may be done at once (zero soak)
    }
    if (!acknowledged && now - stage_start >= Ms(r.stage_timeout())) {
      const std::string reason =
          size == 0
              ? Cat(StageName(r), ": no node of the model connected within the stage ", "timeout")
              : Cat(StageName(r), ": ", acked, " of ", members,
                    " nodes acknowledged the map within the stage timeout (",
                    Ms(r.stage_timeout()) / 1000.0, " s); ",
                    static_cast<int64_t>(std::ceil(r.min_ack_share() * members - 1e-9)),
                    " required");
      if (PauseLocked(run, reason).ok()) moved = true;
    }
    break;
  }
  if (moved) OfferChanges(r.model_hash(), model);
}

Status RolloutEngine::PauseLocked(Run& run, const std::string& reason) {
  v1::Rollout& r = run.state;
  const v1::Rollout before = r;
  r.set_state(v1::ROLLOUT_STATE_PAUSED);
  r.set_pause_reason(reason);
  *r.mutable_update_time() = Stamp(Now());
  if (Status s = Persist(run, {}, /*sync=*/true); !s.ok()) {
    r = before;
    return s;
  }
  spdlog::warn("rollout {} paused: {}", r.rollout_id(), reason);
  return absl::OkStatus();
}

StatusOr<v1::Rollout> RolloutEngine::Pause(const std::string& rollout_id,
                                           const std::string& reason) {
  return Locked([&]() -> StatusOr<v1::Rollout> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    switch (run->state.state()) {
      case v1::ROLLOUT_STATE_PAUSED:
        return View(*run, false);
      case v1::ROLLOUT_STATE_RUNNING:
        RETURN_IF_ERROR(PauseLocked(*run, reason.empty() ? "paused by operator" : reason));
        return View(*run, false);
      default:
        return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " has ended"));
    }
  });
}

StatusOr<v1::Rollout> RolloutEngine::Resume(const std::string& rollout_id) {
  return Locked([&]() -> StatusOr<v1::Rollout> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    v1::Rollout& r = run->state;
    if (r.state() != v1::ROLLOUT_STATE_PAUSED) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " is not paused"));
    }
    const v1::Rollout before = r;
    const int64_t now = Now();
    r.set_state(v1::ROLLOUT_STATE_RUNNING);
    r.clear_pause_reason();
    *r.mutable_stage_start_time() = Stamp(now);
    *r.mutable_update_time() = Stamp(now);
    // Nodes that failed get the map again (their agents retry on a new offer).
    std::vector<std::string> retried;
    for (auto& [node_id, node] : run->nodes) {
      if (node.in_rollout() && node.state() == v1::NODE_MAP_STATE_FAILED) {
        node.set_state(v1::NODE_MAP_STATE_PENDING);
        node.clear_error();
        retried.push_back(node_id);
      }
    }
    if (Status s = Persist(*run, retried, /*sync=*/true); !s.ok()) {
      r = before;
      return s;
    }
    Model& model = models_[r.model_hash()];
    for (const std::string& node_id : retried) {
      if (auto it = model.nodes.find(node_id); it != model.nodes.end()) it->second.offered.reset();
    }
    spdlog::info("rollout {} resumed in {}", rollout_id, StageName(r));
    run->acked_since_ms = 0;
    Step(*run);
    OfferChanges(r.model_hash(), model);
    return View(*run, false);
  });
}

StatusOr<v1::Rollout> RolloutEngine::Rollback(const std::string& rollout_id) {
  return Locked([&]() -> StatusOr<v1::Rollout> {
    ASSIGN_OR_RETURN(Run * run, FindRun(rollout_id));
    v1::Rollout& r = run->state;
    Model& model = models_[r.model_hash()];
    if (model.newest != run->id) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " was superseded by ",
                                               FormatRolloutId(model.newest),
                                               "; roll back that one"));
    }
    if (r.state() == v1::ROLLOUT_STATE_ROLLED_BACK) {
      return absl::FailedPreconditionError(Cat("rollout ", rollout_id, " is rolled back already"));
    }
    const v1::Rollout before = r;
    const int64_t now = Now();
    r.set_state(v1::ROLLOUT_STATE_ROLLED_BACK);
    *r.mutable_update_time() = Stamp(now);
    std::vector<std::string> changed;
    for (auto& [node_id, node] : run->nodes) {
      if (node.assigned_version() != r.map_version()) continue;
      node.set_assigned_version(r.previous_version());
      node.set_state(node.held_version() == r.previous_version() ? v1::NODE_MAP_STATE_APPLIED
                                                                 : v1::NODE_MAP_STATE_PENDING);
      node.clear_error();
      *node.mutable_update_time() = Stamp(now);
      changed.push_back(node_id);
    }
    if (Status s = Persist(*run, changed, /*sync=*/true); !s.ok()) {
      r = before;
      return s;  // nodes keep their records in memory too: the store has them as before
    }
    spdlog::warn("rollout {} rolled back to {} on {} nodes", rollout_id,
                 r.previous_version().empty() ? "no map" : r.previous_version(), changed.size());
    OfferChanges(r.model_hash(), model);
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
    return absl::NotFoundError(Cat("model ", model_hash,
                                   " is unknown: it has no profile, budget map or rollout"));
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
    if (it != run.nodes.end() && it->second.held_version() != held_version) {
      v1::RolloutNode& record = it->second;
      record.set_held_version(held_version);
      if (held_version == record.assigned_version()) {
        record.set_state(v1::NODE_MAP_STATE_APPLIED);
        record.clear_error();
      }
      *record.mutable_update_time() = Stamp(Now());
      if (Status s = Persist(run, {node_id}, /*sync=*/false); !s.ok()) {
        spdlog::warn("rollout {}: node {}: {}", run.state.rollout_id(), node_id, s.ToString());
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

Status RolloutEngine::Report(const v1::ReportBudgetRequest& report) {
  return Locked([&] { return ReportLocked(report); });
}

Status RolloutEngine::ReportLocked(const v1::ReportBudgetRequest& report) {
  auto model_it = models_.find(report.model_hash());
  const auto recorded = [&](const Model& model) {
    return model.newest != 0 && runs_.at(model.newest).nodes.contains(report.node_id());
  };
  if (model_it == models_.end() || (!model_it->second.nodes.contains(report.node_id()) &&
                                    !recorded(model_it->second))) {
    return absl::FailedPreconditionError(Cat("node ", report.node_id(), " has not watched model ",
                                             report.model_hash(), "; open WatchBudgets first"));
  }
  Model& model = model_it->second;
  if (auto it = model.nodes.find(report.node_id()); report.ok() && it != model.nodes.end()) {
    it->second.held_version = report.version();
  }
  if (model.newest == 0) return absl::OkStatus();
  Run& run = runs_.at(model.newest);
  const v1::BudgetAssignment assigned = AssignmentFor(model, report.node_id());
  const int64_t now = Now();
  v1::RolloutNode& node = run.nodes[report.node_id()];
  node.set_node_id(report.node_id());
  node.set_assigned_version(assigned.version());
  if (report.ok()) node.set_held_version(report.version());
  if (report.version() == assigned.version()) {
    node.set_state(report.ok() ? v1::NODE_MAP_STATE_APPLIED : v1::NODE_MAP_STATE_FAILED);
    if (report.ok()) {
      node.clear_error();
    } else {
      node.set_error(report.error().substr(0, 512));
    }
  }
  *node.mutable_update_time() = Stamp(now);
  const bool failed_member = !report.ok() && node.in_rollout() &&
                             report.version() == run.state.map_version() &&
                             run.state.state() == v1::ROLLOUT_STATE_RUNNING;
  RETURN_IF_ERROR(Persist(run, {report.node_id()}, /*sync=*/false));
  if (failed_member) {
    RETURN_IF_ERROR(PauseLocked(run, Cat("node ", report.node_id(), " failed to apply map ",
                                         report.version(), ": ", node.error())));
  }
  Step(run);
  return absl::OkStatus();
}

void RolloutEngine::Tick() {
  Locked([&] {
    for (auto& [hash, model] : models_) {
      if (model.newest == 0) continue;
      Run& run = runs_.at(model.newest);
      if (run.state.state() == v1::ROLLOUT_STATE_RUNNING) Step(run);
    }
    return 0;
  });
}

StatusOr<v1::Rollout> RolloutEngine::Get(const std::string& rollout_id, bool with_nodes) const {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(const Run* run, FindRun(rollout_id));
  if (with_nodes && run->nodes.empty()) {
    // A superseded rollout: its node records are in the store only.
    Run copy = *run;
    ASSIGN_OR_RETURN(std::vector<store::RolloutNodeRecord> records,
                     store_->ListRolloutNodes(run->id));
    for (const store::RolloutNodeRecord& record : records) {
      v1::RolloutNode node;
      if (!node.ParseFromString(record.value)) {
        return absl::DataLossError(
            Cat("rollout ", rollout_id, " node ", record.node_id, " does not decode"));
      }
      copy.nodes.emplace(record.node_id, std::move(node));
    }
    return View(copy, true);
  }
  return View(*run, with_nodes);
}

std::vector<v1::Rollout> RolloutEngine::List(const std::string& model_hash) const {
  std::lock_guard lock(mu_);
  std::vector<v1::Rollout> out;
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) {
    if (model_hash.empty() || it->second.state.model_hash() == model_hash) {
      out.push_back(View(it->second, false));
    }
  }
  return out;
}

v1::Rollout RolloutEngine::View(const Run& run, bool with_nodes) const {
  v1::Rollout out = run.state;
  const v1::Rollout& r = run.state;
  auto model_it = models_.find(r.model_hash());
  const Model* model = model_it == models_.end() ? nullptr : &model_it->second;
  const bool newest = model != nullptr && model->newest == run.id;
  int32_t connected = 0;
  if (model != nullptr) {
    for (const auto& [id, node] : model->nodes) connected += node.sink ? 1 : 0;
  }
  out.set_connected_nodes(connected);
  int32_t members = 0, acked = 0, pending = 0, failed = 0;
  for (const auto& [node_id, node] : run.nodes) {
    if (!node.in_rollout()) continue;
    ++members;
    switch (node.state()) {
      case v1::NODE_MAP_STATE_APPLIED:
        ++acked;
        break;
      case v1::NODE_MAP_STATE_FAILED:
        ++failed;
        break;
      default:
        ++pending;
    }
  }
  out.set_stage_nodes(members);
  out.set_acknowledged(acked);
  out.set_pending(pending);
  out.set_failed(failed);
  if (r.state() == v1::ROLLOUT_STATE_RUNNING && run.acked_since_ms != 0) {
    const int64_t left = std::max<int64_t>(0, Ms(r.soak()) - (Now() - run.acked_since_ms));
    *out.mutable_soak_left() = TimeUtil::MillisecondsToDuration(left);
  }
  if (with_nodes) {
    std::map<std::string, v1::RolloutNode> nodes = run.nodes;
    if (newest) {
      for (const auto& [node_id, node] : model->nodes) {
        v1::RolloutNode& view = nodes[node_id];
        if (view.node_id().empty()) {  // connected, never recorded: holds the previous map
          view.set_node_id(node_id);
          view.set_assigned_version(AssignmentFor(*model, node_id).version());
          view.set_held_version(node.held_version);
          view.set_state(node.held_version == view.assigned_version() ? v1::NODE_MAP_STATE_APPLIED
                                                                      : v1::NODE_MAP_STATE_PENDING);
        }
        view.set_connected(node.sink != nullptr);
      }
    }
    for (auto& [node_id, node] : nodes) *out.add_nodes() = std::move(node);
  }
  return out;
}

}  // namespace ripplekv::scheduler::rollout
