#include "scheduler/core/core_metrics.h"

namespace ripplekv::scheduler {
namespace {

telemetry::Counter& JobsFinished(telemetry::MetricsRegistry& registry, const char* state) {
  return registry.GetCounter("ripplekv_scheduler_jobs_finished_total",
                             "Jobs that reached a final state since the scheduler started.",
                             {"state"}, {state});
}

}  // namespace

CoreMetrics::CoreMetrics(telemetry::MetricsRegistry& r)
    : tasks_leased(r.GetCounter("ripplekv_scheduler_tasks_leased_total",
                                "Task leases handed to workers (every attempt).")),
      tasks_completed(r.GetCounter("ripplekv_scheduler_tasks_completed_total",
                                   "Tasks whose results were accepted and stored.")),
      tasks_retried(r.GetCounter("ripplekv_scheduler_tasks_retried_total",
                                 "Failed task attempts put back for another worker (deadline "
                                 "passed, worker lost, invalid results) below max attempts.")),
      lease_expiries(r.GetCounter("ripplekv_scheduler_lease_expiries_total",
                                  "Leases taken back because they expired (no heartbeat "
                                  "renewed them, or the task deadline passed).")),
      workers_lost(r.GetCounter("ripplekv_scheduler_workers_lost_total",
                                "Workers dropped for silence past the heartbeat timeout.")),
      jobs_succeeded(JobsFinished(r, "succeeded")),
      jobs_failed(JobsFinished(r, "failed")),
      jobs_cancelled(JobsFinished(r, "cancelled")),
      result_latency(r.GetHistogram("ripplekv_scheduler_task_result_latency_seconds",
                                    "From a task's lease to its results being stored, seconds.",
                                    telemetry::LatencyBuckets())),
      quarantines(r.GetCounter("ripplekv_scheduler_quarantines_total",
                               "Workers quarantined: repeated failed attempts, or outvoted in a "
                               "verification.")),
      workers_quarantined(
          r.GetGauge("ripplekv_scheduler_workers_quarantined", "Worker ids under quarantine now.")),
      tasks_verified(r.GetCounter("ripplekv_scheduler_tasks_verified_total",
                                  "Tasks whose results two distinct workers agreed on.")),
      verification_disagreements(
          r.GetCounter("ripplekv_scheduler_verification_disagreements_total",
                       "Verification runs outvoted by two agreeing workers.")),
      tasks_recomputed(r.GetCounter("ripplekv_scheduler_tasks_recomputed_total",
                                    "Done tasks reopened because their worker was outvoted.")),
      tasks_unverified(r.GetCounter("ripplekv_scheduler_tasks_unverified_total",
                                    "Tasks selected for verification that completed unverified: "
                                    "no second worker registered within the verify wait.")) {}

void CoreMetrics::CountEnded(store::JobState state) {
  switch (state) {
    case store::JobState::kSucceeded:
      jobs_succeeded.Add();
      break;
    case store::JobState::kFailed:
      jobs_failed.Add();
      break;
    case store::JobState::kCancelled:
      jobs_cancelled.Add();
      break;
    default:
      break;
  }
}

}  // namespace ripplekv::scheduler
