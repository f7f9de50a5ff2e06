#include "scheduler/core/result_manager.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "method/profile_aggregate.h"

namespace ripplekv::scheduler {

std::string InvalidTaskResult(const store::TaskKey& key, uint32_t trials,
                              const store::TrialResult& r, bool trial_seen) {
  if (r.job != key.job || r.sample != key.sample || r.layer != key.layer) {
    return absl::StrCat("a result of (job ", r.job, ", sample ", r.sample, ", layer ", r.layer,
                        ") came with ", TaskName(key));
  }
  if (r.trial >= trials) {
    return absl::StrCat("trial ", r.trial, " is out of range (the job has ", trials, " trials)");
  }
  if (trial_seen) return absl::StrCat("trial ", r.trial, " twice");
  if (Status valid = method::CheckTrialKl(r.kl); !valid.ok()) {
    return absl::StrCat("trial ", r.trial, ": ", valid.message());
  }
  return {};
}

namespace {

// SplitMix64's finalizer: a bijection of 64-bit words whose outputs pass as independent.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string_view DeviceClass(std::string_view numerics) {
  return numerics.substr(0, numerics.find('/'));
}

}  // namespace

bool VerificationSelected(uint64_t verify_key, const store::TaskKey& key, double fraction) {
  if (!(fraction > 0)) return false;
  if (fraction >= 1) return true;
  const uint64_t h = Mix(Mix(Mix(verify_key ^ key.job) ^ key.sample) ^ key.layer);
  // The top 53 bits as a uniform double in [0, 1).
  return static_cast<double>(h >> 11) * 0x1.0p-53 < fraction;
}

bool ResultsAgree(std::span<const store::TrialResult> a, std::span<const store::TrialResult> b,
                  bool same_numerics, double rel_tolerance) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i].kl;
    const double y = b[i].kl;
    if (a[i].trial != b[i].trial) return false;
    if (same_numerics) {
      if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y)) return false;
    } else if (!(std::abs(x - y) <= rel_tolerance * std::max(std::abs(x), std::abs(y)) + 1e-12)) {
      return false;
    }
  }
  return true;
}

double NumericsTolerance(std::string_view a, std::string_view b) {
  if (DeviceClass(a) == "cpu-fp32" && DeviceClass(b) == "cpu-fp32") return 1e-2;
  return 5e-2;
}

namespace {

// A key no worker can predict (the verification sample must not be guessable).
uint64_t RandomKey() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ 1;
}

}  // namespace

ResultManager::ResultManager(store::Store* store, const SchedulerOptions& options,
                             CoreMetrics& metrics)
    : options_(options),
      metrics_(metrics),
      verify_key_(options.faults.verify_key != 0 ? options.faults.verify_key : RandomKey()),
      committer_(store) {}

std::string ResultManager::CheckResults(const store::TaskKey& key, uint32_t trials,
                                        std::span<const store::TrialResult> results) {
  std::string invalid;
  std::vector<bool> seen(trials, false);
  for (const store::TrialResult& r : results) {
    invalid = InvalidTaskResult(key, trials, r, r.trial < trials && seen[r.trial]);
    if (!invalid.empty()) return invalid;
    seen[r.trial] = true;
  }
  if (results.size() != trials) {
    return absl::StrCat("done with ", results.size(), " of ", trials, " trials");
  }
  return {};
}

bool ResultManager::Selected(const store::TaskKey& key, double fraction) const {
  return VerificationSelected(verify_key_, key, fraction);
}

ResultManager::Verdict ResultManager::Verify(const std::string& worker_id,
                                             const std::string& numerics, const store::TaskKey& key,
                                             std::vector<store::TrialResult> results, int64_t now,
                                             const std::function<bool()>& other_eligible) {
  using Kind = Verdict::Kind;
  std::sort(
      results.begin(), results.end(),
      [](const store::TrialResult& a, const store::TrialResult& b) { return a.trial < b.trial; });
  Verification& v = verifying_[key];
  if (v.runs.empty()) v.first_ms = now;
  v.runs.push_back({.worker_id = worker_id, .numerics = numerics, .results = results});
  // Bitwise only for one CPU build: GPUs of one build but another model may round differently.
  auto agree = [](const VerifyRun& a, const VerifyRun& b) {
    const bool same_build = a.numerics == b.numerics && DeviceClass(a.numerics) == "cpu-fp32";
    return ResultsAgree(a.results, b.results, same_build,
                        NumericsTolerance(a.numerics, b.numerics));
  };
  const VerifyRun& run = v.runs.back();
  const auto peer = std::find_if(v.runs.begin(), v.runs.end() - 1,
                                 [&](const VerifyRun& r) { return agree(r, run); });
  JobVerification& record = verification_[key.job];
  if (peer != v.runs.end() - 1) {
    // Two distinct workers agree: the task completes with this run; the others are outvoted.
    Verdict verdict{.kind = Kind::kAgreed, .agreeing = {peer->worker_id, worker_id}};
    for (auto r = v.runs.begin(); r != v.runs.end() - 1; ++r) {
      if (!agree(*r, run)) verdict.outvoted.push_back(r->worker_id);
    }
    verifying_.erase(key);
    ++record.verified;
    metrics_.tasks_verified.Add();
    for (const std::string& bad : verdict.outvoted) {
      record.disagreements.push_back({.sample = key.sample,
                                      .layer = key.layer,
                                      .outvoted_worker = bad,
                                      .agreeing_workers = verdict.agreeing});
      record.outvoted.insert(bad);
      metrics_.verification_disagreements.Add();
    }
    verdict.results = std::move(results);
    return verdict;
  }
  if (v.runs.size() >= options_.max_attempts) {
    std::vector<std::string> ids;
    for (const VerifyRun& r : v.runs) ids.push_back(r.worker_id);
    return {.kind = Kind::kNoAgreement,
            .why = absl::StrCat("no two of ", ids.size(), " workers agree on ", TaskName(key), " (",
                                absl::StrJoin(ids, ", "),
                                "): their builds or devices differ beyond the tolerance, "
                                "or more than one is faulty")};
  }
  if (v.runs.size() == 1 && now - v.first_ms >= options_.faults.verify_wait_ms &&
      !other_eligible()) {
    // Nobody can verify it now and the wait is zero: it completes unverified.
    verifying_.erase(key);
    ++record.unverified;
    metrics_.tasks_unverified.Add();
    return {.kind = Kind::kUnverified, .results = std::move(results)};
  }
  return {.kind = Kind::kHeld};
}

bool ResultManager::RanBy(const store::TaskKey& key, const std::string& worker_id) const {
  auto held = verifying_.find(key);
  if (held == verifying_.end()) return false;
  return std::any_of(held->second.runs.begin(), held->second.runs.end(),
                     [&](const VerifyRun& r) { return r.worker_id == worker_id; });
}

const ResultManager::Verification* ResultManager::Held(const store::TaskKey& key) const {
  auto it = verifying_.find(key);
  return it == verifying_.end() ? nullptr : &it->second;
}

void ResultManager::DropRunsOf(const std::string& worker_id) {
  for (auto v = verifying_.begin(); v != verifying_.end();) {
    std::erase_if(v->second.runs, [&](const VerifyRun& r) { return r.worker_id == worker_id; });
    v = v->second.runs.empty() ? verifying_.erase(v) : std::next(v);
  }
}

std::vector<std::pair<store::TaskKey, std::string>> ResultManager::Waited(int64_t now) const {
  std::vector<std::pair<store::TaskKey, std::string>> waited;
  for (const auto& [key, v] : verifying_) {
    if (v.runs.size() != 1 || now - v.first_ms < options_.faults.verify_wait_ms) continue;
    waited.push_back({key, v.runs.front().worker_id});
  }
  return waited;
}

ResultManager::VerifyRun ResultManager::TakeUnverified(const store::TaskKey& key) {
  VerifyRun run = std::move(verifying_.at(key).runs.front());
  verifying_.erase(key);
  ++verification_[key.job].unverified;
  metrics_.tasks_unverified.Add();
  return run;
}

bool ResultManager::Outvoted(store::JobId job, const std::string& worker_id) const {
  auto record = verification_.find(job);
  return record != verification_.end() && record->second.outvoted.contains(worker_id);
}

void ResultManager::CountRecomputed(store::JobId job, uint64_t n) {
  verification_[job].recomputed += n;
  metrics_.tasks_recomputed.Add(static_cast<double>(n));
}

method::ProfileVerification ResultManager::ProfileVerificationOf(store::JobId job,
                                                                 double fraction) const {
  method::ProfileVerification verified{.fraction = fraction};
  if (auto v = verification_.find(job); v != verification_.end()) {
    verified.tasks_verified = v->second.verified;
    verified.tasks_unverified = v->second.unverified;
    verified.tasks_recomputed = v->second.recomputed;
    verified.disagreements = v->second.disagreements;
  }
  return verified;
}

void ResultManager::FillProgress(JobProgress& progress) const {
  if (auto v = verification_.find(progress.job.id); v != verification_.end()) {
    progress.tasks_verified = v->second.verified;
    progress.disagreements = static_cast<uint32_t>(v->second.disagreements.size());
  }
}

void ResultManager::StartCompleting(const store::TaskKey& key, const std::string& worker_id,
                                    const Lease& lease) {
  completing_.insert_or_assign(key, Completing{.worker_id = worker_id, .lease = lease});
}

int64_t ResultManager::FinishCompleting(const store::TaskKey& key, uint32_t attempt) {
  auto c = completing_.find(key);
  if (c == completing_.end() || c->second.lease.attempt != attempt) return -1;
  const int64_t leased_ms = c->second.lease.leased_ms;
  completing_.erase(c);
  return leased_ms;
}

void ResultManager::ForgetJob(store::JobId id) {
  // The store released the job's leases with its state change.
  completing_.erase(completing_.lower_bound(store::TaskKey{id, 0, 0}),
                    completing_.lower_bound(store::TaskKey{id + 1, 0, 0}));
  verifying_.erase(verifying_.lower_bound(store::TaskKey{id, 0, 0}),
                   verifying_.lower_bound(store::TaskKey{id + 1, 0, 0}));
  verification_.erase(id);
}

void ResultManager::SetHeldListener(HeldCompletionListener listener) {
  std::lock_guard lock(listener_mu_);
  held_listener_ = std::move(listener);
}

void ResultManager::NotifyHeld(const std::string& worker_id, const store::TaskKey& key,
                               const StatusOr<TaskResultsOutcome>& outcome) {
  std::lock_guard lock(listener_mu_);
  if (held_listener_) held_listener_(worker_id, key, outcome);
}

}  // namespace ripplekv::scheduler
