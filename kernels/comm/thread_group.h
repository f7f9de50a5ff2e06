#pragma once
// The Communicator over threads of one process: a group whose ranks are threads sharing memory,
// with no MPI and no launcher. It moves host values and host tensors (the contract of
// kernels/ops/communicator.h: sums in rank order, the same bits on every rank) and is the host
// channel of an NCCL group whose ranks are threads, each on its own GPU (NcclGroup in
// nccl_communicator.h): how a single process drives several GPUs, as the device bundle's tests do
// on a machine without MPI (docs/DEVICE.md).
//
// Every collective is a rendezvous: a rank waits, up to the group's timeout, for every other rank
// to make the same call. A rank that waits longer gets DeadlineExceeded and breaks the group for
// all: the ranks waiting with it and every later call of any rank fail with FailedPrecondition.
// Ranks whose calls do not match (another call, another size, another root) all get
// InvalidArgument and nothing moves; the group stays usable.
//
// Thread-safety: each rank's communicator is called by one thread at a time (normally the rank's
// own thread); the ranks' communicators are called concurrently, which is the point.

#include <chrono>
#include <memory>
#include <vector>

#include "base/status.h"
#include "kernels/ops/communicator.h"

namespace ripplekv::kernels {

// A group of `size` ranks: element r of the result is rank r's communicator. The communicators
// share the group's state, so they may be destroyed in any order, each after its last call.
// `timeout` bounds each collective's wait for the other ranks. InvalidArgument when size < 1.
[[nodiscard]] StatusOr<std::vector<std::unique_ptr<Communicator>>> ThreadGroup(
    int size, std::chrono::milliseconds timeout);

}  // namespace ripplekv::kernels
