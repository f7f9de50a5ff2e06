#pragma once
// Worker-to-scheduler messages about an assigned task, as the tests' fake and lying workers send
// them (worker.proto). Header-only: the messages only.

#include <cstdint>
#include <vector>

#include "ripplekv/v1/worker.pb.h"

namespace ripplekv::worker_messages {

// Names `task` (id, job, sample, layer) in a TrialResult or TaskDone.
template <typename Message>
void NameTask(const v1::TaskAssignment& task, Message* m) {
  m->set_task_id(task.task_id());
  m->set_job_id(task.job_id());
  m->set_sample(task.sample());
  m->set_layer(task.layer());
}

// A trial_result for trial `trial` of `task`.
inline v1::WorkerMessage TrialResultMessage(const v1::TaskAssignment& task, int32_t trial,
                                            double kl) {
  v1::WorkerMessage message;
  v1::TrialResult* r = message.mutable_trial_result();
  NameTask(task, r);
  r->set_trial(trial);
  r->set_kl(kl);
  return message;
}

// A task_done without an error for `task`.
inline v1::WorkerMessage TaskDoneMessage(const v1::TaskAssignment& task) {
  v1::WorkerMessage message;
  NameTask(task, message.mutable_task_done());
  return message;
}

// A task_done without an error for `task` carrying its results: trial t has kl[t].
inline v1::WorkerMessage TaskDoneWithResults(const v1::TaskAssignment& task,
                                             const std::vector<double>& kl) {
  v1::WorkerMessage message = TaskDoneMessage(task);
  for (size_t t = 0; t < kl.size(); ++t) {
    *message.mutable_task_done()->add_results() =
        TrialResultMessage(task, static_cast<int32_t>(t), kl[t]).trial_result();
  }
  return message;
}

}  // namespace ripplekv::worker_messages
