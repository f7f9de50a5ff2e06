#pragma once
// The Communicator over NCCL for CUDA tensors: the tensor-parallel path on GPUs. Device
// collectives run on NCCL; host values (AllReduceSum/AllReduceMax of doubles, Broadcast, Barrier)
// go through a host group of the same ranks, which also carries NCCL's unique id at creation: the
// MPI group of ranks that are processes under mpirun (MpiGroup), or the thread group of ranks that
// are threads of one process (ThreadGroup, kernels/comm/thread_group.h).
// NCCL is loaded at first use (kernels/comm/nccl_api.h), so linking this library costs processes
// that never form a group nothing.
//
// Deviation from the Communicator contract: AllReduceSum on the device is NCCL's reduction (ring
// or tree, chosen by NCCL per size and topology). Every rank gets the same bits, but not the
// rank-order sum: the result may differ in the last bits from the MPI communicator's, and from
// one group size or topology to another.
//
// Timeouts: NCCL collectives are asynchronous, and a peer that hangs shows up as a stream that
// never completes. The communicator is non-blocking (NCCL's config.blocking = 0), so creation and
// queuing never block either. Each device collective waits, inside the call, for its work to
// complete on ctx.stream, polling NCCL's asynchronous error state and an event recorded after the
// collective against the timeout (there is no watchdog thread). On an asynchronous error (Internal)
// or when the timeout passes (DeadlineExceeded) the NCCL communicator is aborted and the
// Communicator is broken: every later call, host ones too, fails with FailedPrecondition. A host
// call that fails the same way through the host group breaks it too. Waiting makes each device
// collective a synchronization point of ctx.stream with the host.
//
// Not thread-safe: one thread at a time calls a communicator (as for the MPI one). The ranks of a
// group may be threads of one process, each calling its own rank's communicator.

#include <chrono>
#include <memory>

#include "kernels/comm/mpi_communicator.h"
#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"

namespace ripplekv::kernels {

// An NCCL group over the ranks of `host_group` (the same rank numbers), on `session`'s CUDA
// device. Collective: every rank of host_group calls it together. Rank 0 creates NCCL's unique id
// and broadcasts it over host_group; every rank then joins on its session's device
// (context().ordinal). Two ranks of one group must not share a device: under mpirun callers choose
// it from runtime.local_rank() (for example cuda:(local_rank % DeviceCount)); ranks that are
// threads of one process (host_group from ThreadGroup) take cuda:rank.
//
// Device collectives must then be called with a context on that device (session.context() or one
// like it, with its own stream). `host_group` must outlive the communicator. `timeout` bounds
// creation and each device collective (host calls use host_group's timeout).
//
// FailedPrecondition with the reason when NCCL cannot be loaded, the session is not a CUDA
// session, or another rank of the group cannot start (every rank learns this, so none is left
// waiting); DeadlineExceeded when the ranks do not all join within `timeout`; Internal with
// NCCL's message otherwise.
[[nodiscard]] StatusOr<std::unique_ptr<Communicator>> NcclGroup(Communicator& host_group,
                                                                const DeviceSession& session,
                                                                std::chrono::milliseconds timeout);

// The same under an MPI launcher (host_group from MpiGroup): messages name the rank's world and
// local rank too.
[[nodiscard]] StatusOr<std::unique_ptr<Communicator>> NcclGroup(const MpiRuntime& runtime,
                                                                Communicator& host_group,
                                                                const DeviceSession& session,
                                                                std::chrono::milliseconds timeout);

}  // namespace ripplekv::kernels
