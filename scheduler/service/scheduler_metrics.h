#pragma once
// The scheduler's metrics computed at scrape time (docs/OPERATIONS.md, "Metrics"): active jobs by
// state, connected workers, the database's size on disk, and rollouts by state with each active
// rollout's stage and node counts. The event counters and the latency histograms are counted
// where the events happen (Scheduler, the store's write observer).

#include <string>

#include "scheduler/core/scheduler.h"
#include "scheduler/rollout/rollout_engine.h"
#include "store/store.h"
#include "telemetry/metrics.h"

namespace ripplekv::scheduler::service {

struct SchedulerMetricSources {
  const store::Store* store = nullptr;
  const Scheduler* scheduler = nullptr;
  const rollout::RolloutEngine* rollouts = nullptr;
  std::string db_path;  // the RocksDB directory, for its size
};

// Adds the collected families to `registry`; every source must outlive it.
void AddSchedulerCollectors(telemetry::MetricsRegistry& registry,
                            const SchedulerMetricSources& sources);

}  // namespace ripplekv::scheduler::service
