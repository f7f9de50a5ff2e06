#include "scheduler/service/scheduler_metrics.h"

#include <filesystem>
#include <map>
#include <system_error>

namespace ripplekv::scheduler::service {
namespace {

using telemetry::MetricsRegistry;
using telemetry::Sample;

// Bytes of the regular files under `dir` (SST files, logs, manifests); files that vanish during
// the walk (compactions) are skipped.
double DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  uint64_t bytes = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uint64_t size = it->file_size(size_ec);
      if (!size_ec) bytes += size;
    }
  }
  return static_cast<double>(bytes);
}

bool Active(const rollout::RolloutView& r) {
  return r.record.state == store::RolloutState::kRunning ||
         r.record.state == store::RolloutState::kPaused;
}

}  // namespace

void AddSchedulerCollectors(MetricsRegistry& registry, const SchedulerMetricSources& sources) {
  const store::Store* store = sources.store;
  registry.AddCollected(
      "ripplekv_scheduler_jobs", "Jobs not yet final, by state (pending, running).",
      MetricsRegistry::Type::kGauge, {"state"}, [store] {
        double pending = 0, running = 0;
        StatusOr<std::vector<store::Job>> jobs = store->ListJobs({.active_only = true});
        if (!jobs.ok()) return std::vector<Sample>{};  // the scrape shows the gap
        for (const store::Job& job : *jobs) {
          (job.state == store::JobState::kPending ? pending : running) += 1;
        }
        return std::vector<Sample>{{{"pending"}, pending}, {{"running"}, running}};
      });
  const Scheduler* scheduler = sources.scheduler;
  registry.AddCollected(
      "ripplekv_scheduler_workers_connected", "Workers registered and not dropped.",
      MetricsRegistry::Type::kGauge, {}, [scheduler] {
        return std::vector<Sample>{{{}, static_cast<double>(scheduler->Workers().size())}};
      });
  registry.AddCollected(
      "ripplekv_scheduler_store_size_bytes",
      "Bytes of the RocksDB directory on disk (SST files, write-ahead log, manifests).",
      MetricsRegistry::Type::kGauge, {}, [dir = sources.db_path] {
        return std::vector<Sample>{{{}, DirectoryBytes(dir)}};
      });

  const rollout::RolloutEngine* rollouts = sources.rollouts;
  registry.AddCollected("ripplekv_scheduler_rollouts", "Rollouts by state, all time.",
                        MetricsRegistry::Type::kGauge, {"state"}, [rollouts] {
                          std::map<std::string, double> by_state;
                          for (const char* s : {"running", "paused", "succeeded", "rolled_back"}) {
                            by_state[s] = 0;
                          }
                          for (const rollout::RolloutView& r : rollouts->List("")) {
                            by_state[std::string(store::RolloutStateName(r.record.state))] += 1;
                          }
                          std::vector<Sample> out;
                          for (const auto& [state, n] : by_state) out.push_back({{state}, n});
                          return out;
                        });
  registry.AddCollected(
      "ripplekv_scheduler_rollout_stage",
      "Index of the current stage of each running or paused rollout (0 = the first).",
      MetricsRegistry::Type::kGauge, {"rollout", "model"}, [rollouts] {
        std::vector<Sample> out;
        for (const rollout::RolloutView& r : rollouts->List("")) {
          if (Active(r)) {
            out.push_back({{r.rollout_id, r.record.model_hash}, double(r.record.stage)});
          }
        }
        return out;
      });
  registry.AddCollected(
      "ripplekv_scheduler_rollout_nodes",
      "Nodes of the current stage of each running or paused rollout, by state (acknowledged, "
      "pending, failed).",
      MetricsRegistry::Type::kGauge, {"rollout", "state"}, [rollouts] {
        std::vector<Sample> out;
        for (const rollout::RolloutView& r : rollouts->List("")) {
          if (!Active(r)) continue;
          out.push_back({{r.rollout_id, "acknowledged"}, double(r.acknowledged)});
          out.push_back({{r.rollout_id, "pending"}, double(r.pending)});
          out.push_back({{r.rollout_id, "failed"}, double(r.failed)});
        }
        return out;
      });
}

}  // namespace ripplekv::scheduler::service
