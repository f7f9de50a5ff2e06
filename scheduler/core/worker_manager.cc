#include "scheduler/core/worker_manager.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/core/result_manager.h"

namespace ripplekv::scheduler {
namespace {

// A lease that is gone already (done, expired and re-leased): not an error for the caller.
bool LeaseGone(const Status& s) { return absl::IsFailedPrecondition(s) || absl::IsNotFound(s); }

}  // namespace

WorkerManager::WorkerManager(store::Store* store, const SchedulerOptions& options)
    : store_(store), options_(options) {}

WorkerState* WorkerManager::Find(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerState& WorkerManager::Add(const std::string& worker_id) {
  evicted_.erase(worker_id);
  return workers_[worker_id] = WorkerState{};
}

std::map<store::TaskKey, Lease> WorkerManager::Remove(const std::string& worker_id, int64_t now) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return {};
  std::map<store::TaskKey, Lease> leased = std::move(it->second.leased);
  if (auto h = health_.find(worker_id); h != health_.end()) h->second.last_seen_ms = now;
  workers_.erase(it);
  return leased;
}

Status WorkerManager::UnknownWorker(const std::string& worker_id) const {
  if (auto it = evicted_.find(worker_id); it != evicted_.end()) {
    return absl::FailedPreconditionError(it->second);
  }
  return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id, "; register again"));
}

void WorkerManager::Evict(const std::string& worker_id, const std::string& why) {
  evicted_.insert_or_assign(worker_id, why);
}

const std::string* WorkerManager::Evicted(const std::string& worker_id) const {
  auto it = evicted_.find(worker_id);
  return it == evicted_.end() ? nullptr : &it->second;
}

StatusOr<WorkerState*> WorkerManager::HeldLease(const std::string& worker_id,
                                                const LeaseId& lease) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  auto held = it->second.leased.find(lease.key);
  if (held == it->second.leased.end() || held->second.attempt != lease.attempt) {
    return absl::FailedPreconditionError(absl::StrCat(TaskName(lease.key), " attempt ",
                                                      lease.attempt, " is not a lease worker ",
                                                      worker_id, " holds"));
  }
  return &it->second;
}

Status WorkerManager::Heartbeat(const std::string& worker_id, std::span<const PrefillKey> held,
                                std::span<const LeaseId> leases, int64_t now, bool renew) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return UnknownWorker(worker_id);
  WorkerState& w = it->second;
  w.last_seen_ms = now;
  w.held = std::set<PrefillKey>(held.begin(), held.end());
  if (!renew) return absl::OkStatus();
  for (const LeaseId& listed : leases) {
    auto lease = w.leased.find(listed.key);
    if (lease == w.leased.end() || lease->second.attempt != listed.attempt) continue;
    const int64_t deadline =
        std::min(now + options_.lease_duration_ms, lease->second.task_deadline_ms);
    if (deadline <= now) continue;  // past the task deadline: ExpireLeases takes it back
    StatusOr<store::Task> t = store_->ExtendLease(listed.key, worker_id, deadline);
    if (LeaseGone(t.status())) {
      w.leased.erase(lease);
    } else if (!t.ok()) {
      return t.status();
    } else {
      lease->second.lease_deadline_ms = deadline;
    }
  }
  return absl::OkStatus();
}

void WorkerManager::DropJobLeases(store::JobId id) {
  for (auto& [worker_id, w] : workers_) {
    std::erase_if(w.leased, [id](const auto& lease) { return lease.first.job == id; });
    w.last_sample.erase(id);
  }
}

bool WorkerManager::OtherEligible(const std::string& worker_id, const std::string& hash,
                                  const store::TaskKey& key, int64_t now,
                                  const ResultManager& results) const {
  auto failed = failures_.find(key);
  for (const auto& [id, w] : workers_) {
    if (id == worker_id || w.model.hash != hash || w.refused_jobs.contains(key.job) ||
        Quarantined(id, now)) {
      continue;
    }
    if (failed != failures_.end() && failed->second.failed_at.contains(id)) continue;
    if (results.RanBy(key, id)) continue;
    return true;
  }
  return false;
}

bool WorkerManager::MayLease(const std::string& worker_id, const WorkerState& worker,
                             const store::TaskKey& key, int64_t now,
                             const ResultManager& results) const {
  // A verification needs runs by distinct workers: never the same worker twice.
  if (results.RanBy(key, worker_id)) return false;
  auto failed = failures_.find(key);
  if (failed == failures_.end()) return true;
  auto at = failed->second.failed_at.find(worker_id);
  if (at == failed->second.failed_at.end()) return true;
  // It failed here: back to this worker only after the grace, and only when nobody else can.
  return now - at->second >= options_.faults.exclusion_grace_ms &&
         !OtherEligible(worker_id, worker.model.hash, key, now, results);
}

std::optional<store::TaskKey> WorkerManager::Choose(const std::string& worker_id,
                                                    const WorkerState& worker, store::JobId job,
                                                    const PendingSet& pending, int64_t now,
                                                    const ResultManager& results) const {
  // Most tasks were never failed nor held: only those need the eligibility check.
  const bool check = !failures_.empty() || results.AnyHeld();
  auto ok = [&](const store::TaskKey& key) {
    return !check || MayLease(worker_id, worker, key, now, results);
  };
  // The first eligible task at or after `it` within sample `s`, if any.
  auto first_of = [&](PendingSet::const_iterator it, uint32_t s) -> std::optional<store::TaskKey> {
    for (; it != pending.end() && it->sample == s; ++it) {
      if (ok(*it)) return *it;
    }
    return std::nullopt;
  };
  // The lowest eligible pending task of sample `s`, if any.
  auto of_sample = [&](uint32_t s) -> std::optional<store::TaskKey> {
    return first_of(pending.lower_bound(store::TaskKey{job, s, 0}), s);
  };
  // The lowest eligible pending task whose sample satisfies `pred`, visiting each sample once.
  auto first_pending = [&](auto&& pred) -> std::optional<store::TaskKey> {
    for (auto it = pending.begin(); it != pending.end();) {
      if (pred(it->sample)) {
        if (auto k = first_of(it, it->sample)) return k;
      }
      if (it->sample == UINT32_MAX) break;
      it = pending.lower_bound(store::TaskKey{job, it->sample + 1, 0});
    }
    return std::nullopt;
  };
  auto any = [](uint32_t) { return true; };
  if (pending.empty()) return std::nullopt;
  if (!options_.prefill_affinity) return first_pending(any);

  std::optional<uint32_t> last;
  if (auto it = worker.last_sample.find(job); it != worker.last_sample.end()) last = it->second;
  auto holds = [&](uint32_t s) { return worker.held.contains(PrefillKey{job, s}); };
  // 1. A sample whose prefill the worker holds, the one it was given last first.
  if (last && holds(*last)) {
    if (auto k = of_sample(*last)) return k;
  }
  for (auto held = worker.held.lower_bound(PrefillKey{job, 0});
       held != worker.held.end() && held->job == job; ++held) {
    if (auto k = of_sample(held->sample)) return k;
  }
  // 2. The sample it was given last (its prefill is probably cached even if not reported yet).
  if (last) {
    if (auto k = of_sample(*last)) return k;
  }
  // 3. A sample no other worker holds or works on, so two workers do not prefill the same one.
  std::set<uint32_t> claimed;
  for (const auto& [id, other] : workers_) {
    if (id == worker_id || other.model.hash != worker.model.hash) continue;
    for (auto held = other.held.lower_bound(PrefillKey{job, 0});
         held != other.held.end() && held->job == job; ++held) {
      claimed.insert(held->sample);
    }
    if (auto it = other.last_sample.find(job); it != other.last_sample.end()) {
      claimed.insert(it->second);
    }
  }
  if (auto k = first_pending([&](uint32_t s) { return !claimed.contains(s); })) return k;
  // 4. Anything left (tail of the job: help another worker's sample).
  return first_pending(any);
}

size_t WorkerManager::CountTaskFailure(const store::TaskKey& key, const std::string& worker_id,
                                       const std::string& why, int64_t now) {
  TaskFailures& count = failures_[key];
  count.failed_at[worker_id] = now;
  count.last_reason = why;
  return count.failed_at.size();
}

void WorkerManager::ForgetJobFailures(store::JobId id) {
  failures_.erase(failures_.lower_bound(store::TaskKey{id, 0, 0}),
                  failures_.lower_bound(store::TaskKey{id + 1, 0, 0}));
}

bool WorkerManager::Quarantined(const std::string& worker_id, int64_t now) const {
  auto it = health_.find(worker_id);
  return it != health_.end() && it->second.quarantined_until > now;
}

WorkerManager::Health& WorkerManager::HealthOf(const std::string& worker_id) {
  Health& h = health_[worker_id];
  if (auto w = workers_.find(worker_id); w != workers_.end()) {
    h.model_hash = w->second.model.hash;
    h.last_seen_ms = w->second.last_seen_ms;
  }
  return h;
}

std::optional<std::string> WorkerManager::Charge(const std::string& worker_id,
                                                 const std::string& why, int64_t now) {
  Health& h = HealthOf(worker_id);
  std::erase_if(h.failures,
                [&](int64_t t) { return now - t >= options_.faults.quarantine_window_ms; });
  h.failures.push_back(now);
  if (h.failures.size() < options_.faults.quarantine_failures || Quarantined(worker_id, now)) {
    return std::nullopt;
  }
  return absl::StrCat(h.failures.size(), " failed attempts within ",
                      options_.faults.quarantine_window_ms / 1000, " s; last: ", why);
}

bool WorkerManager::MarkQuarantined(const std::string& worker_id, const std::string& why,
                                    int64_t now) {
  Health& h = HealthOf(worker_id);
  const bool was = h.quarantined_until > now;
  h.quarantined_until = now + options_.faults.quarantine_ms;
  h.quarantine_reason = why;
  h.failures.clear();
  return !was;
}

int WorkerManager::LiftExpired(int64_t now) {
  int lifted = 0;
  for (auto it = health_.begin(); it != health_.end();) {
    Health& h = it->second;
    if (h.quarantined_until != 0 && h.quarantined_until <= now) {
      h.quarantined_until = 0;
      h.quarantine_reason.clear();
      ++lifted;
    }
    std::erase_if(h.failures,
                  [&](int64_t t) { return now - t >= options_.faults.quarantine_window_ms; });
    const bool idle = h.quarantined_until == 0 && h.failures.empty();
    it = idle ? health_.erase(it) : std::next(it);
  }
  return lifted;
}

StatusOr<std::string> WorkerManager::Lift(const std::string& worker_id, int64_t now) {
  auto it = health_.find(worker_id);
  if (it == health_.end() || !Quarantined(worker_id, now)) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not quarantined"));
  }
  std::string reason = std::move(it->second.quarantine_reason);
  health_.erase(it);
  return reason;
}

std::map<std::string, WorkerInfo> WorkerManager::Infos(int64_t now) const {
  std::map<std::string, WorkerInfo> all;
  for (const auto& [id, w] : workers_) {
    all[id] = WorkerInfo{.worker_id = id,
                         .connected = true,
                         .model_hash = w.model.hash,
                         .version = w.version,
                         .device = w.device,
                         .numerics = w.numerics,
                         .capacity = w.capacity,
                         .leases = static_cast<uint32_t>(w.leased.size()),
                         .last_seen_ms = w.last_seen_ms,
                         .tasks_completed = w.tasks_completed};
  }
  for (const auto& [id, h] : health_) {
    auto it = all.find(id);
    if (it == all.end()) {
      if (h.quarantined_until <= now) continue;  // only its failures: shown while registered
      it = all.emplace(id, WorkerInfo{.worker_id = id, .last_seen_ms = h.last_seen_ms}).first;
    }
    WorkerInfo& info = it->second;
    info.recent_failures =
        static_cast<uint32_t>(std::count_if(h.failures.begin(), h.failures.end(), [&](int64_t t) {
          return now - t < options_.faults.quarantine_window_ms;
        }));
    if (h.quarantined_until > now) {
      info.quarantined = true;
      info.quarantine_reason = h.quarantine_reason;
      info.quarantined_until_ms = h.quarantined_until;
    }
  }
  return all;
}

}  // namespace ripplekv::scheduler
