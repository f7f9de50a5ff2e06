#pragma once
// This process's place in a tensor-parallel group (docs/DESIGN.md §3.2), for the commands and the
// worker started under `mpirun`: the world's ranks form groups of `tp` consecutive ranks, each
// holding one shard of the model. On the CPU the forward passes' collectives go over MPI; on a
// CUDA device over NCCL, each rank on its own GPU.

#include <memory>

#include "base/status.h"
#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"
#include "worker/model/model.h"

namespace ripplekv::worker {

struct TpGroup {
  int rank = 0;                                     // within the group
  int group = 0;                                    // which group of the world
  int groups = 1;                                   // groups in the world
  std::unique_ptr<kernels::Communicator> host;      // MPI over the group's ranks
  std::unique_ptr<kernels::Communicator> model;     // the forward passes': MPI or NCCL
  std::unique_ptr<kernels::Communicator> commands;  // a worker's task stream (no deadline)
  Model shard;
};

// The device ordinal of the rank with node-local rank `local_rank` when the process sees
// `visible` devices: (base + local_rank) mod visible. Every rank seeing all of a node's GPUs gets
// its own; a rank shown only its own GPU (CUDA_VISIBLE_DEVICES per rank, Slurm's --gpu-bind, one
// GPU per container) gets ordinal 0 instead of an ordinal it cannot see. Ranks sharing a device
// (fewer visible devices than ranks) are NCCL's to refuse. FailedPrecondition when `visible` < 1,
// InvalidArgument for a negative base or local rank.
[[nodiscard]] StatusOr<int> TpDeviceOrdinal(int base, int local_rank, int visible);

// Before the device is opened: starts MPI and checks the launch (under mpirun, the world a
// multiple of tp, or exactly tp when `whole_world`); returns the device this rank uses: `device`
// itself on the CPU, cuda:TpDeviceOrdinal(ordinal, local rank, visible devices) on CUDA.
// FailedPrecondition naming the problem (no mpirun, wrong rank count, no visible device, a build
// without MPI or NCCL).
[[nodiscard]] StatusOr<kernels::DeviceSpec> TpDevice(int tp, kernels::DeviceSpec device,
                                                     bool whole_world);

// Joins the group (TpDevice first), keeps this rank's shard of `full` and drops the file's pages
// the sharding read (full.release_mapped_pages). `session` must outlive the group. Ranks other
// than 0 log warnings only. With `commands`, also the task channel of a worker group.
[[nodiscard]] StatusOr<std::unique_ptr<TpGroup>> JoinTpGroup(int tp,
                                                             const kernels::DeviceSession& session,
                                                             const Model& full, bool commands);

}  // namespace ripplekv::worker
