#pragma once
// The scheduler core's counters and latency histogram (docs/OPERATIONS.md, "Metrics"), shared by
// its managers: tasks leased, completed and retried, lease expiries, workers lost, jobs finished
// by state, result latency, quarantines, verification. Each series lives as long as its registry.
// Thread-safety: the series are the registry's (thread-safe); the core updates them under its
// mutex or on the committer's thread.

#include "store/types.h"
#include "telemetry/metrics.h"

namespace ripplekv::scheduler {

struct CoreMetrics {
  explicit CoreMetrics(telemetry::MetricsRegistry& registry);

  // Counts a job that reached `state` (succeeded, failed or cancelled; others are not counted).
  void CountEnded(store::JobState state);

  telemetry::Counter& tasks_leased;
  telemetry::Counter& tasks_completed;
  telemetry::Counter& tasks_retried;
  telemetry::Counter& lease_expiries;
  telemetry::Counter& workers_lost;
  telemetry::Counter& jobs_succeeded;
  telemetry::Counter& jobs_failed;
  telemetry::Counter& jobs_cancelled;
  telemetry::Histogram& result_latency;
  telemetry::Counter& quarantines;
  telemetry::Gauge& workers_quarantined;
  telemetry::Counter& tasks_verified;
  telemetry::Counter& verification_disagreements;
  telemetry::Counter& tasks_recomputed;
  telemetry::Counter& tasks_unverified;
};

}  // namespace ripplekv::scheduler
