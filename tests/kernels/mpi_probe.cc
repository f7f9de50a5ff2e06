// A two-rank program for mpi_fault_test: one rank misbehaves, the other calls a barrier.
//   mpi_probe hang   rank 1 never joins; rank 0 (timeout 500 ms) reports and aborts the job
//   mpi_probe die    rank 1 kills itself with SIGKILL; rank 0 waits (timeout 60 s)
// Rank 0 prints the barrier's status on stderr.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "kernels/comm/mpi_communicator.h"

int main(int argc, char** argv) {
  using ripplekv::kernels::MpiGroup;
  using ripplekv::kernels::MpiRuntime;
  auto runtime = MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok() || argc != 2) return 2;
  const bool hang = std::strcmp(argv[1], "hang") == 0;
  auto group = MpiGroup(**runtime, 2, hang ? std::chrono::milliseconds(500)
                                           : std::chrono::milliseconds(60000));
  if (!group.ok()) return 2;
  if ((*runtime)->world_rank() == 1) {
    if (!hang) raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
  }
  const auto status = (*group)->Barrier();
  std::fprintf(stderr, "rank 0: %s\n", status.ToString().c_str());
  if (!status.ok()) (*runtime)->Abort(3);
  return 0;
}
