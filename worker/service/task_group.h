#pragma once
// A tensor-parallel worker group (docs/DESIGN.md §3.2): N MPI ranks, each holding its shard of the
// model and its own TaskRunner, act as one worker. Rank 0 speaks to the scheduler; every command of
// its runner that touches the model (a job's samples installed, a task run, a job dropped) goes to
// the other ranks first, in order, over a command channel, and they run it too, so all ranks meet
// in every collective of the forward passes. The results reported are rank 0's.
//
// The channel is a communicator of its own (the same ranks as the model's), with a timeout long
// enough for an idle worker: followers wait on it between jobs. A rank that dies ends the whole
// mpirun job, and the scheduler re-leases the group's tasks as for any lost worker.

#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/ops/communicator.h"
#include "worker/service/task_runner.h"

namespace ripplekv::worker {

class TaskGroup {
 public:
  explicit TaskGroup(kernels::Communicator& commands) : commands_(commands) {}

  // Rank 0: the mirror to install with TaskRunner::SetMirror. Dropped jobs are sent with the next
  // command (a drop may come from another thread while a task runs; the followers need not free
  // the job's memory sooner).
  TaskRunner::Mirror Leader();
  // Rank 0: tells the followers to exit (after the client drained).
  [[nodiscard]] Status Dismiss();
  // The other ranks: run rank 0's commands on `runner` until dismissed. A command that fails here
  // is logged (rank 0 fails the same task, or times out in a collective); an error of the channel
  // ends the loop.
  [[nodiscard]] Status Follow(TaskRunner& runner);

 private:
  [[nodiscard]] Status Send(const std::string& bytes);
  [[nodiscard]] StatusOr<std::string> Receive();
  [[nodiscard]] Status SendPendingDrops();

  kernels::Communicator& commands_;
  std::mutex mu_;                          // one command on the channel at a time
  std::vector<std::string> pending_drops_;  // guarded by mu_
};

}  // namespace ripplekv::worker
