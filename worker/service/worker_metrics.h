#pragma once
// The worker's Prometheus metrics (docs/OPERATIONS.md, "Metrics"), computed at scrape time from
// what the client, the task runner and the device session already count: trials, tasks and busy
// time (rates give trials/s and the busy fraction), the prepared-sample cache, the device's
// memory and the process's resident memory, and whether a stream to the scheduler is open.

#include <string>

#include "kernels/ops/devices.h"
#include "telemetry/metrics.h"
#include "worker/service/task_runner.h"
#include "worker/service/worker_client.h"

namespace ripplekv::worker {

// Adds the worker's families to `registry`; `client`, `runner` and `session` must outlive every
// scrape of it (stop the metrics server first).
void AddWorkerCollectors(telemetry::MetricsRegistry& registry, const WorkerClient* client,
                         const TaskRunner* runner, const kernels::DeviceSession* session);

}  // namespace ripplekv::worker
