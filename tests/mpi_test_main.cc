// main() of the tests that run under mpirun (ripplekv_mpi_test in tests/CMakeLists.txt):
// initializes MPI once, runs every case on every rank, and exits non-zero on every rank when any
// rank failed, so mpirun reports the failure whichever rank saw it.

#include <gtest/gtest.h>

#include <cstdio>
#include <span>

#include "kernels/comm/mpi_communicator.h"

int main(int argc, char** argv) {
  auto runtime = ripplekv::kernels::MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  auto world = ripplekv::kernels::MpiGroup(**runtime, (*runtime)->world_size(),
                                           std::chrono::seconds(60));
  double any = failed;
  if (!world.ok() || !(*world)->AllReduceMax(std::span<double>(&any, 1)).ok()) return 1;
  return any > 0 ? 1 : 0;
}
