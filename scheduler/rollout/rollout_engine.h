#pragma once
// Staged rollouts of frozen budget maps to serving nodes (docs/ROLLOUTS.md): which map each node
// of a model should hold, the rollouts' state machine (running -> paused / succeeded / rolled
// back), node selection per stage, acknowledgements, soak and deadlines, and durability through
// the store. Its state is the store's rollout records (store/types.h) and it knows no RPC: the
// gRPC adapter (scheduler/service/rollout_service.h) converts messages to the calls here and
// gives each WatchBudgets stream an AssignmentSink.
//
// What a node of model M is told to hold follows from M's newest rollout R alone:
//   none                 -> no map ("")
//   R running or paused  -> R's map if the node was selected into R, else R's previous map
//   R succeeded          -> R's map
//   R rolled back        -> R's previous map
// A stage covers StageSize() of the connected nodes; nodes are added in NodeRank() order and
// stay added. A stage is done when it covers its size, at least min_ack_share of its nodes
// reported the map applied, none reported failure, and the soak time has passed since that
// happened; then the next stage starts (after the last, the rollout succeeds). A failure report
// pauses the rollout; so does a stage that is not done within stage_timeout of its start.
//
// Durability: every transition (create, a stage's new nodes, advance, pause, resume, rollback) is
// one synced store write made BEFORE any node hears of it, so after a crash no node holds a map
// its rollout did not durably assign. Node reports are written unsynced: a node states what it
// holds again whenever it reconnects. Load() resumes every rollout where the store left it.
//
// Thread-safety: every method may be called from any thread (one internal mutex). Sinks are
// called after that mutex is released, so a sink may call back into the engine (Unwatch); offers
// carry an increasing sequence number so that a sink can drop one that overtook a newer one.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "scheduler/rollout/map_version.h"
#include "scheduler/rollout/rollout_types.h"
#include "store/store.h"

namespace ripplekv::scheduler::rollout {

// One node's open WatchBudgets stream.
class AssignmentSink {
 public:
  virtual ~AssignmentSink() = default;
  // Queues `assignment` for the node; a newer one may replace one not yet sent. `sequence`
  // increases with every offer the engine makes: ignore one lower than an offer already taken.
  virtual void Offer(const Assignment& assignment, uint64_t sequence) = 0;
  // A newer stream of the same node replaced this one: end it (ABORTED).
  virtual void Replace() = 0;
};

struct RolloutEngineOptions {
  std::function<int64_t()> now_ms;  // wall clock, ms since the epoch; null: the system clock
};

class RolloutEngine {
 public:
  // Reads every rollout from `store` (which must outlive the engine) and resumes them.
  // Errors: the store's (DataLoss for a record that does not decode).
  [[nodiscard]] static StatusOr<std::unique_ptr<RolloutEngine>> Load(
      store::Store* store, RolloutEngineOptions options = {});

  // Starts a rollout (docs/ROLLOUTS.md for every check). InvalidArgument naming the field;
  // NotFound: no such map version; FailedPrecondition: the model has a running or paused rollout,
  // or the map is what its nodes already hold.
  [[nodiscard]] StatusOr<RolloutView> Create(const RolloutRequest& request);
  // NotFound for an unknown id; InvalidArgument for a malformed one.
  [[nodiscard]] StatusOr<RolloutView> Get(const std::string& rollout_id, bool with_nodes) const;
  // Newest first; `model_hash` empty: every model.
  [[nodiscard]] std::vector<RolloutView> List(const std::string& model_hash) const;
  [[nodiscard]] StatusOr<RolloutView> Pause(const std::string& rollout_id,
                                            const std::string& reason);
  [[nodiscard]] StatusOr<RolloutView> Resume(const std::string& rollout_id);
  [[nodiscard]] StatusOr<RolloutView> Rollback(const std::string& rollout_id);

  // A node's stream opened: records what it holds, replaces an older stream of the node, may
  // select it into the running stage, and offers its assignment to `sink` at once. NotFound
  // naming the hash when the store knows nothing of the model (no profile, no budget map, no
  // rollout): nothing is recorded for it.
  [[nodiscard]] Status Watch(const std::string& node_id, const std::string& model_hash,
                             const std::string& held_version, std::shared_ptr<AssignmentSink> sink);
  // The stream `sink` of the node ended (a replaced stream's end changes nothing). The node's
  // entry goes (its rollout record, if any, stays), and so does the model's once no node watches
  // it and it has no rollout: what the engine holds per caller is bounded by the open streams.
  void Unwatch(const std::string& node_id, const std::string& model_hash,
               const AssignmentSink* sink);
  // A node's outcome (an error is kept to its first 512 bytes, whole characters).
  // FailedPrecondition when the node neither watches the model now nor has a record in its newest
  // rollout.
  [[nodiscard]] Status Report(const BudgetReport& report);

  // Node entries held (watching nodes, by model), and models held (watched or with a rollout):
  // for tests and the soak benchmark that check nothing stays behind a closed stream.
  size_t tracked_nodes() const;
  size_t tracked_models() const;

  // Soak and deadline checks of every running rollout; call periodically (every ~100 ms).
  void Tick();

 private:
  struct Node {
    std::string held_version;              // as last reported (applied), "" unknown or none
    std::shared_ptr<AssignmentSink> sink;  // null while disconnected
    std::optional<std::string> offered;    // version last offered on the current stream
  };
  struct Run {
    uint64_t id = 0;
    std::string rollout_id;      // "r" + id
    store::RolloutRecord state;  // as stored
    // Nodes with a record in this rollout, by node id (loaded for each model's newest rollout).
    std::map<std::string, store::RolloutNodeRecord> nodes;
    std::map<std::string, uint64_t> ranks;  // NodeRank cache
    int64_t acked_since_ms = 0;             // when the stage became acknowledged; 0 not yet
  };
  struct Model {
    std::map<std::string, Node> nodes;  // the nodes watching now, by id
    uint64_t newest = 0;                // id of the newest rollout; 0 none
  };

  // Sink calls decided under mu_, made after it is released.
  struct Outbox {
    std::vector<std::tuple<std::shared_ptr<AssignmentSink>, Assignment, uint64_t>> offers;
    std::vector<std::shared_ptr<AssignmentSink>> replaced;
  };

  RolloutEngine(store::Store* store, RolloutEngineOptions options);
  int64_t Now() const;
  // Runs `body` with mu_ held, then makes the sink calls it queued.
  template <typename Body>
  auto Locked(Body body) -> decltype(body());

  // Everything below runs with mu_ held.
  StatusOr<RolloutView> CreateLocked(const RolloutRequest& request);
  Status WatchLocked(const std::string& node_id, const std::string& model_hash,
                     const std::string& held_version, std::shared_ptr<AssignmentSink> sink);
  Status ReportLocked(const BudgetReport& report);
  // Whether the store knows `model_hash`: it has a profile or a budget map (a rollout needs a
  // map, so a model with rollouts has one too).
  bool KnownModel(const std::string& model_hash) const;
  StatusOr<Run*> FindRun(const std::string& rollout_id);
  StatusOr<const Run*> FindRun(const std::string& rollout_id) const;
  // What `node_id` of `model` should hold, and the rollout that says so ("" none).
  Assignment AssignmentFor(const Model& model, const std::string& node_id) const;
  // Offers every connected node of `model` its assignment when it differs from the last offer.
  void OfferChanges(const std::string& model_hash, Model& model);
  // Persists `run`'s record and `changed` node records in one write (synced when `sync`).
  Status Persist(Run& run, const std::vector<std::string>& changed, bool sync);
  // Selects nodes, advances stages, checks deadlines; persists and offers what changed.
  void Step(Run& run);
  Status PauseLocked(Run& run, const std::string& reason);
  // The rollout with counts (and nodes when asked).
  RolloutView View(const Run& run, bool with_nodes) const;
  // The stored map version, read once; null when it cannot be read.
  std::shared_ptr<const MapVersion> MapFor(const std::string& model_hash,
                                           const std::string& version);

  store::Store* const store_;
  const RolloutEngineOptions options_;
  mutable std::mutex mu_;
  std::map<uint64_t, Run> runs_;         // every rollout; nodes only for each model's newest
  std::map<std::string, Model> models_;  // by model hash
  std::map<std::string, std::shared_ptr<const MapVersion>> maps_;  // "hash/version", read once
  Outbox outbox_;
  uint64_t offer_sequence_ = 0;
};

}  // namespace ripplekv::scheduler::rollout
