#include "worker/engine/tp_group.h"

#include <chrono>

#include "base/strings.h"
#include "kernels/comm/mpi_communicator.h"
#include "kernels/ops/devices.h"
#include "spdlog/spdlog.h"
#include "worker/model/model_shard.h"

#if RIPPLEKV_WITH_NCCL
#include "kernels/comm/nccl_communicator.h"
#endif

namespace ripplekv::worker {

namespace {

// Collectives inside a forward pass; a peer silent this long has hung.
constexpr std::chrono::minutes kCollectiveTimeout{10};
// A worker's followers wait for rank 0's next task between jobs: a year is "no deadline".
constexpr std::chrono::hours kCommandTimeout{24 * 365};

}  // namespace

StatusOr<int> TpDeviceOrdinal(int base, int local_rank, int visible) {
  if (base < 0 || local_rank < 0) {
    return absl::InvalidArgumentError(
        Cat("device ordinal ", base, " and local rank ", local_rank, " must be >= 0"));
  }
  if (visible < 1) {
    return absl::FailedPreconditionError(Cat("local rank ", local_rank,
                                             " sees no device (CUDA_VISIBLE_DEVICES, the job's GPU "
                                             "binding, or the driver)"));
  }
  return (base + local_rank) % visible;
}

StatusOr<kernels::DeviceSpec> TpDevice(int tp, kernels::DeviceSpec device, bool whole_world) {
  if (!kernels::MpiRuntime::Launched()) {
    return absl::FailedPreconditionError(
        Cat("--tp ", tp, " runs under mpirun: mpirun -np ", tp, " ... --tp ", tp));
  }
  ASSIGN_OR_RETURN(kernels::MpiRuntime * runtime, kernels::MpiRuntime::Init(nullptr, nullptr));
  const int world = runtime->world_size();
  if (whole_world ? world != tp : world % tp != 0) {
    return absl::FailedPreconditionError(Cat("--tp ", tp, " under mpirun with ", world,
                                             " ranks (use -np ", tp, whole_world ? "" : " x k",
                                             ")"));
  }
  if (device.device == kernels::Device::kCpu) return device;
#if RIPPLEKV_WITH_NCCL
  ASSIGN_OR_RETURN(device.ordinal, TpDeviceOrdinal(device.ordinal, runtime->local_rank(),
                                                   kernels::DeviceCount(device.device)));
  return device;
#else
  return absl::FailedPreconditionError(
      Cat("--tp on ", kernels::DeviceSpecName(device), ": this build has no NCCL communicator"));
#endif
}

StatusOr<std::unique_ptr<TpGroup>> JoinTpGroup(int tp, const kernels::DeviceSession& session,
                                               const Model& full, bool commands) {
  ASSIGN_OR_RETURN(kernels::MpiRuntime * runtime, kernels::MpiRuntime::Init(nullptr, nullptr));
  auto g = std::make_unique<TpGroup>();
  ASSIGN_OR_RETURN(g->host, kernels::MpiGroup(*runtime, tp, kCollectiveTimeout));
  if (commands) {
    ASSIGN_OR_RETURN(g->commands, kernels::MpiGroup(*runtime, tp, kCommandTimeout));
  }
  if (session.context().device == kernels::Device::kCpu) {
    ASSIGN_OR_RETURN(g->model, kernels::MpiGroup(*runtime, tp, kCollectiveTimeout));
  } else {
#if RIPPLEKV_WITH_NCCL
    ASSIGN_OR_RETURN(g->model, kernels::NcclGroup(*runtime, *g->host, session, kCollectiveTimeout));
#else
    return absl::FailedPreconditionError("--tp on a device: this build has no NCCL communicator");
#endif
  }
  g->rank = g->host->rank();
  g->group = runtime->world_rank() / tp;
  g->groups = runtime->world_size() / tp;
  if (g->rank != 0) spdlog::set_level(spdlog::level::warn);
  ASSIGN_OR_RETURN(g->shard, ShardModel(full, g->rank, tp));
  if (full.release_mapped_pages) full.release_mapped_pages();  // only this rank's slices return
  spdlog::info("tensor-parallel rank {} of {} on {}: query heads {}..{}, KV heads {}..{}", g->rank,
               tp, kernels::DeviceSpecName(session.spec()), g->shard.shard.first_head,
               g->shard.shard.first_head + g->shard.config.n_heads - 1,
               g->shard.shard.first_kv_head,
               g->shard.shard.first_kv_head + g->shard.config.n_kv_heads - 1);
  return g;
}

}  // namespace ripplekv::worker
