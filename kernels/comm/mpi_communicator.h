#pragma once
// The Communicator over MPI for host tensors (OpenMPI from Debian): the tensor-parallel path on
// CPUs, and the control channel of NCCL groups. Collectives are non-blocking MPI calls polled
// against a deadline, so a peer that hangs gives DeadlineExceeded instead of a hang; a peer that
// dies makes mpirun end the job.
//
// MpiRuntime initializes MPI once per process (MPI_THREAD_SERIALIZED: any thread may call MPI, one
// at a time — a worker's task thread runs the collectives and its main thread dismisses the group;
// OpenMP threads inside ops never call it) and finalizes it at exit.

#include <chrono>
#include <memory>

#include "kernels/ops/communicator.h"

namespace ripplekv::kernels {

class MpiRuntime {
 public:
  // Initializes MPI (argc/argv as main received them; may be null). Internal when MPI cannot
  // start. Once per process; later calls return the same runtime.
  [[nodiscard]] static StatusOr<MpiRuntime*> Init(int* argc, char*** argv);
  // Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, a PMI
  // launcher PMI_SIZE, a PMIx one such as `srun --mpi=pmix` PMIX_RANK) — without one, a process
  // is a world of one.
  static bool Launched();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // The rank's index among the ranks of its node (for choosing a GPU).
  int local_rank() const { return local_rank_; }

  // Aborts every rank of the world with `code` (after a broken communicator).
  [[noreturn]] void Abort(int code) const;

 private:
  MpiRuntime() = default;
  int world_rank_ = 0, world_size_ = 1, local_rank_ = 0;
};

// A group of consecutive world ranks: ranks [g * group_size, (g + 1) * group_size) form group g.
// InvalidArgument when group_size does not divide the world size.
[[nodiscard]] StatusOr<std::unique_ptr<Communicator>> MpiGroup(const MpiRuntime& runtime,
                                                               int group_size,
                                                               std::chrono::milliseconds timeout);

}  // namespace ripplekv::kernels
