#pragma once
// The recorded model summaries (docs/SCHEDULER.md, "The recorded model summary"; the rules are in
// scheduler.h, "Model summary"): one summary per model hash, durable in the store, chosen from the
// registered workers' reports with the first job's ModelRef or by agreement; and the ModelRef
// (layer count, name) of each active job. Record returns the registered workers that differ from
// a summary it records; the Scheduler façade drops them.
//
// Thread-safety: none of its own; every method requires the Scheduler's mutex.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "method/profile.h"
#include "scheduler/core/worker_manager.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

// What a job's submitter said of its model: 0 / empty when not given.
struct ModelRef {
  int64_t n_layers = 0;
  std::string name;
  // Whether a worker's summary agrees with what was given (fields not given agree).
  bool Admits(const method::ProfileModel& m) const {
    return (n_layers == 0 || m.n_layers == n_layers) && (name.empty() || m.name == name);
  }
};

// InvalidArgument naming the field of a worker registration's model summary that is missing or
// not positive.
[[nodiscard]] Status ValidateModel(const method::ProfileModel& m);

class ModelRegistry {
 public:
  // `store` is not owned and must outlive this object.
  explicit ModelRegistry(store::Store* store) : store_(store) {}

  // Loads the stored summaries once.
  [[nodiscard]] Status Load();
  // The recorded summary of `hash`; null when none is recorded.
  const method::ProfileModel* Recorded(const std::string& hash) const;
  // FailedPrecondition naming each differing field when `reported` differs from the summary
  // recorded for its hash.
  [[nodiscard]] Status CheckRegistration(const std::string& worker_id,
                                         const method::ProfileModel& reported) const;
  // The layer count most registered workers of `hash` admitted by `ref` report, when one count
  // is the most; 0 otherwise.
  static int64_t AgreedLayers(const std::string& hash, const ModelRef& ref,
                              const std::map<std::string, WorkerState>& workers);

  // A job was created with `ref`: it is the job's, and the hash's first when it has none.
  void NoteCreated(store::JobId id, const std::string& hash, const ModelRef& ref);
  // The ModelRef of an active job: as submitted to this process, else derived from the job.
  const ModelRef& JobRef(const store::Job& job);
  void ForgetJob(store::JobId id) { job_refs_.erase(id); }
  bool HasFirstRef(const std::string& hash) const { return first_refs_.contains(hash); }
  // After a restart: `oldest`, the oldest active job of `hash`, stands for its first job.
  void SetFirstRef(const std::string& hash, const store::Job& oldest);

  // Records the summary of `hash` when none is recorded and `workers` establish one; returns the
  // registered workers of the hash whose summary differs, each with why it is dropped.
  [[nodiscard]] StatusOr<std::vector<std::pair<std::string, std::string>>> Record(
      const std::string& hash, const std::map<std::string, WorkerState>& workers);

 private:
  store::Store* const store_;
  std::map<std::string, method::ProfileModel> models_;  // by hash, the recorded ones (durable)
  bool loaded_ = false;                                 // the stored ones are in models_
  // By hash without a recorded summary: the ModelRef of its first job (Record).
  std::map<std::string, ModelRef> first_refs_;
  std::map<store::JobId, ModelRef> job_refs_;  // active jobs' ModelRefs; dropped when a job ends
};

}  // namespace ripplekv::scheduler
