#include "worker/service/worker_metrics.h"

#include <unistd.h>

#include <cstdio>

namespace ripplekv::worker {
namespace {

using telemetry::MetricsRegistry;
using telemetry::Sample;

// Resident set size of this process, bytes (/proc/self/statm); nothing when unreadable.
std::vector<Sample> ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return {};
  long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (n != 2) return {};
  return {{{}, static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE))}};
}

}  // namespace

void AddWorkerCollectors(MetricsRegistry& registry, const WorkerClient* client,
                         const TaskRunner* runner, const kernels::DeviceSession* session) {
  using Type = MetricsRegistry::Type;
  // One snapshot of the client's stats per family: each is a cheap copy under its mutex.
  auto stat = [client](double (*field)(const WorkerClientStats&)) {
    return [client, field] { return std::vector<Sample>{{{}, field(client->stats())}}; };
  };
  registry.AddCollected("ripplekv_worker_trials_total", "Perturbation trials whose KL was sent.",
                        Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return double(s.trials_sent); }));
  registry.AddCollected("ripplekv_worker_tasks_completed_total",
                        "Tasks whose results were sent without error.", Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return double(s.tasks_done); }));
  registry.AddCollected("ripplekv_worker_tasks_failed_total",
                        "Tasks that ended in an error sent to the scheduler.", Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return double(s.tasks_failed); }));
  registry.AddCollected("ripplekv_worker_tasks_refused_total",
                        "Tasks refused (wrong model, too much memory, data unavailable, draining).",
                        Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return double(s.tasks_refused); }));
  registry.AddCollected(
      "ripplekv_worker_busy_seconds_total",
      "Seconds spent handling tasks (checking, loading data, running, sending results); its rate "
      "is the busy fraction.",
      Type::kCounter, {}, stat([](const WorkerClientStats& s) { return s.busy_seconds; }));
  registry.AddCollected("ripplekv_worker_connected_seconds_total",
                        "Seconds with a stream to the scheduler open.", Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return s.connected_seconds; }));
  registry.AddCollected("ripplekv_worker_connected",
                        "1 while a stream to the scheduler is open, else 0.", Type::kGauge, {},
                        stat([](const WorkerClientStats& s) { return s.connected ? 1.0 : 0.0; }));
  registry.AddCollected("ripplekv_worker_registrations_total",
                        "Successful registrations with the scheduler.", Type::kCounter, {},
                        stat([](const WorkerClientStats& s) { return double(s.registrations); }));

  registry.AddCollected("ripplekv_worker_prepared_cache_bytes",
                        "Bytes held by the prepared-sample cache.", Type::kGauge, {}, [runner] {
                          return std::vector<Sample>{{{}, double(runner->cache_stats().bytes)}};
                        });
  registry.AddCollected(
      "ripplekv_worker_prepared_cache_requests_total",
      "Prepared-sample cache look-ups, by result (hit, miss).", Type::kCounter, {"result"},
      [runner] {
        const PreparedCacheStats s = runner->cache_stats();
        return std::vector<Sample>{{{"hit"}, double(s.hits)}, {{"miss"}, double(s.misses)}};
      });
  registry.AddCollected("ripplekv_worker_prepared_cache_evictions_total",
                        "Prepared samples dropped for the cache's byte budget.", Type::kCounter, {},
                        [runner] {
                          return std::vector<Sample>{{{}, double(runner->cache_stats().evictions)}};
                        });
  const std::string device = kernels::DeviceSpecName(session->spec());
  registry.AddCollected(
      "ripplekv_worker_device_memory_used_bytes",
      "Memory in use on the worker's GPU, by every process on it (absent for CPU workers).",
      Type::kGauge, {"device"}, [session, device] {
        StatusOr<kernels::DeviceSession::Memory> m = session->DeviceMemory();
        if (!m.ok()) return std::vector<Sample>{};
        return std::vector<Sample>{{{device}, double(m->used_bytes)}};
      });
  registry.AddCollected("ripplekv_worker_device_memory_total_bytes",
                        "Memory of the worker's GPU (absent for CPU workers).", Type::kGauge,
                        {"device"}, [session, device] {
                          StatusOr<kernels::DeviceSession::Memory> m = session->DeviceMemory();
                          if (!m.ok()) return std::vector<Sample>{};
                          return std::vector<Sample>{{{device}, double(m->total_bytes)}};
                        });
  registry.AddCollected("ripplekv_worker_resident_memory_bytes",
                        "Resident memory of the worker process.", Type::kGauge, {}, &ResidentBytes);
}

}  // namespace ripplekv::worker
