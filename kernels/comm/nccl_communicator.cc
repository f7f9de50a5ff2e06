#include "kernels/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "kernels/comm/nccl_api.h"

namespace ripplekv::kernels {

namespace {

using Clock = std::chrono::steady_clock;
using nccl::NcclApi;
using nccl::NcclErrorText;

// Spin briefly (collectives inside a forward pass finish in microseconds), then back off.
void Backoff(int polls) {
  if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// An NCCL communicator whose default disposal is ncclCommAbort: any path that does not close it
// cleanly (a failed creation, a broken group) ends its work in flight instead of waiting for it.
struct CommAbort {
  const NcclApi* api = nullptr;
  void operator()(ncclComm* comm) const { api->comm_abort(comm); }
};
using Comm = std::unique_ptr<ncclComm, CommAbort>;

struct EventDestroy {
  void operator()(CUevent_st* event) const { cudaEventDestroy(event); }
};
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

// Polls a non-blocking communicator's state until it leaves ncclInProgress: ncclSuccess, NCCL's
// error, or ncclInProgress when `deadline` passed first.
ncclResult_t Settle(const NcclApi& api, ncclComm_t comm, Clock::time_point deadline) {
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = api.comm_get_async_error(comm, &state);
    if (result != ncclSuccess) return result;
    if (state != ncclInProgress) return state;
    if (Clock::now() > deadline) return ncclInProgress;
    Backoff(polls);
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi& api, Comm comm, Event done, Communicator& host_group, int device,
                   std::chrono::milliseconds timeout)
      : api_(api),
        comm_(std::move(comm)),
        done_(std::move(done)),
        host_(host_group),
        device_(device),
        timeout_(timeout),
        rank_(host_group.rank()),
        size_(host_group.size()) {}

  // Healthy: ncclCommFinalize (flushes this rank's work), then ncclCommDestroy; aborts instead
  // when finalizing fails or outlasts the timeout. A broken communicator was aborted already.
  ~NcclCommunicator() override {
    if (comm_ == nullptr) return;
    cudaSetDevice(device_);
    ncclResult_t result = api_.comm_finalize(comm_.get());
    if (result == ncclInProgress) result = Settle(api_, comm_.get(), Clock::now() + timeout_);
    if (result == ncclSuccess) api_.comm_destroy(comm_.release());
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(const OpContext& ctx, const TensorView& x) override {
    RETURN_IF_ERROR(Prepare("AllReduceSum", ctx, {x.device}));
    const auto n = static_cast<size_t>(x.numel());
    if (n == 0) return absl::OkStatus();
    return Complete("AllReduceSum", ctx,
                    api_.all_reduce(x.data, x.data, n, ncclFloat, ncclSum, comm_.get(),
                                    static_cast<cudaStream_t>(ctx.stream)));
  }

  Status AllGather(const OpContext& ctx, const ConstTensorView& in,
                   const TensorView& out) override {
    RETURN_IF_ERROR(Prepare("AllGather", ctx, {in.device, out.device}));
    if (out.numel() != in.numel() * size_) {
      return absl::InvalidArgumentError(Cat("AllGather: out holds ", out.numel(), " values for ",
                                            size_, " ranks of ", in.numel()));
    }
    const auto n = static_cast<size_t>(in.numel());
    if (n == 0) return absl::OkStatus();
    return Complete("AllGather", ctx,
                    api_.all_gather(in.data, out.data, n, ncclFloat, comm_.get(),
                                    static_cast<cudaStream_t>(ctx.stream)));
  }

  Status AllReduceSum(std::span<double> values) override {
    RETURN_IF_ERROR(Usable("AllReduceSum"));
    return OnHost(host_.AllReduceSum(values));
  }
  Status AllReduceMax(std::span<double> values) override {
    RETURN_IF_ERROR(Usable("AllReduceMax"));
    return OnHost(host_.AllReduceMax(values));
  }
  Status Broadcast(std::span<uint8_t> bytes, int root) override {
    RETURN_IF_ERROR(Usable("Broadcast"));
    return OnHost(host_.Broadcast(bytes, root));
  }
  Status Barrier() override {
    RETURN_IF_ERROR(Usable("Barrier"));
    return OnHost(host_.Barrier());
  }

 private:
  Status Usable(const char* op) const {
    if (comm_ == nullptr) {
      return absl::FailedPreconditionError(
          Cat(op, ": the NCCL communicator is broken (an earlier call timed out or failed)"));
    }
    return absl::OkStatus();
  }

  // Checks that the call may run (a healthy group; ctx and every tensor on this group's device)
  // and makes that device the calling thread's.
  Status Prepare(const char* op, const OpContext& ctx, std::initializer_list<Device> tensors) {
    RETURN_IF_ERROR(Usable(op));
    bool here = ctx.device == Device::kCuda && ctx.ordinal == device_;
    for (Device device : tensors) here = here && device == Device::kCuda;
    if (!here) {
      return absl::InvalidArgumentError(Cat(
          op, ": the NCCL communicator moves tensors of cuda:", device_, " on a context of it"));
    }
    if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      return Break(absl::InternalError(Cat(op, ": cudaSetDevice: ", cudaGetErrorString(e))));
    }
    return absl::OkStatus();
  }

  // Waits for a collective that NCCL answered `queued` to: first for NCCL to queue it on
  // ctx.stream (a non-blocking communicator may still be connecting to its peers), then for the
  // stream to run it, watching NCCL's asynchronous error state, until the timeout.
  Status Complete(const char* op, const OpContext& ctx, ncclResult_t queued) {
    const auto deadline = Clock::now() + timeout_;
    if (queued == ncclInProgress) queued = Settle(api_, comm_.get(), deadline);
    if (queued == ncclInProgress) return TimedOut(op);
    if (queued != ncclSuccess) return Failed(op, queued);
    if (const cudaError_t e = cudaEventRecord(done_.get(), static_cast<cudaStream_t>(ctx.stream));
        e != cudaSuccess) {
      return Break(absl::InternalError(Cat(op, ": cudaEventRecord: ", cudaGetErrorString(e))));
    }
    for (int polls = 0;; ++polls) {
      const cudaError_t e = cudaEventQuery(done_.get());
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) {
        return Break(absl::InternalError(
            Cat(op, ": the device failed while the collective ran: ", cudaGetErrorString(e))));
      }
      ncclResult_t state = ncclSuccess;
      const ncclResult_t result = api_.comm_get_async_error(comm_.get(), &state);
      if (result != ncclSuccess) return Failed(op, result);
      if (state != ncclSuccess && state != ncclInProgress) return Failed(op, state);
      if (Clock::now() > deadline) return TimedOut(op);
      Backoff(polls);
    }
  }

  Status TimedOut(const char* op) {
    return Break(
        absl::DeadlineExceededError(Cat(op, ": rank ", rank_, " of ", size_, " waited more than ",
                                        timeout_.count(), " ms for its NCCL peers")));
  }
  Status Failed(const char* op, ncclResult_t result) {
    return Break(
        absl::InternalError(Cat(op, ": NCCL: ", NcclErrorText(api_, result, comm_.get()))));
  }
  // A host call's outcome: any failure but a rejected argument breaks the group too.
  Status OnHost(Status status) {
    if (status.ok() || absl::IsInvalidArgument(status)) return status;
    return Break(std::move(status));
  }
  // Aborts the NCCL communicator (which ends its collectives in flight, so the stream drains) and
  // leaves this one broken.
  Status Break(Status status) {
    cudaSetDevice(device_);
    comm_.reset();
    return status;
  }

  const NcclApi& api_;
  Comm comm_;   // null once broken
  Event done_;  // recorded after each device collective
  Communicator& host_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  const int rank_, size_;
};

// Forms the group; `where` names this rank in every message.
StatusOr<std::unique_ptr<Communicator>> FormGroup(const std::string& where,
                                                  Communicator& host_group,
                                                  const DeviceSession& session,
                                                  std::chrono::milliseconds timeout) {
  const OpContext& ctx = session.context();
  const int rank = host_group.rank(), size = host_group.size();

  // Each rank checks that it can take part (rank 0 also makes the id), then all agree, so a rank
  // that cannot start fails the whole group at once instead of leaving the others waiting.
  std::string why;
  const NcclApi* api = nccl::Nccl(&why);
  Status mine;
  ncclUniqueId id{};
  if (api == nullptr) {
    mine = absl::FailedPreconditionError(Cat(where, ": ", why));
  } else if (ctx.device != Device::kCuda) {
    mine = absl::FailedPreconditionError(
        Cat(where, ": the session is on ", DeviceSpecName(session.spec()), ", not a CUDA device"));
  } else if (const cudaError_t e = cudaSetDevice(ctx.ordinal); e != cudaSuccess) {
    mine = absl::FailedPreconditionError(
        Cat(where, ": cudaSetDevice(", ctx.ordinal, "): ", cudaGetErrorString(e)));
  } else if (rank == 0) {
    if (const ncclResult_t r = api->get_unique_id(&id); r != ncclSuccess) {
      mine = absl::InternalError(Cat(where, ": ncclGetUniqueId: ", NcclErrorText(*api, r)));
    }
  }
  std::vector<double> failed = {mine.ok() ? 0.0 : static_cast<double>(rank + 1)};
  RETURN_IF_ERROR(host_group.AllReduceMax(failed));
  if (!mine.ok()) return mine;
  if (failed[0] > 0) {
    return absl::FailedPreconditionError(
        Cat(where, ": rank ", static_cast<int>(failed[0]) - 1, " of the group cannot start NCCL"));
  }
  RETURN_IF_ERROR(host_group.Broadcast(
      std::span<uint8_t>(reinterpret_cast<uint8_t*>(id.internal), sizeof(id.internal)), 0));

  // Non-blocking: creation (and later every collective) returns at once and is polled against a
  // deadline, so a rank that never joins gives DeadlineExceeded instead of a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const auto deadline = Clock::now() + timeout;
  ncclComm_t raw = nullptr;
  ncclResult_t result = api->comm_init_rank_config(&raw, size, id, rank, &config);
  Comm comm(raw, CommAbort{api});
  if (result == ncclInProgress)
    result = raw != nullptr ? Settle(*api, raw, deadline) : ncclInternalError;
  if (result == ncclInProgress) {
    return absl::DeadlineExceededError(Cat(where, ": the group did not form within ",
                                           timeout.count(), " ms (a rank did not join)"));
  }
  if (result != ncclSuccess) {
    return absl::InternalError(
        Cat(where, ": ncclCommInitRankConfig: ", NcclErrorText(*api, result, raw)));
  }
  cudaEvent_t event = nullptr;
  if (const cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      e != cudaSuccess) {
    return absl::InternalError(Cat(where, ": cudaEventCreate: ", cudaGetErrorString(e)));
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(*api, std::move(comm), Event(event), host_group, ctx.ordinal, timeout));
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> NcclGroup(Communicator& host_group,
                                                  const DeviceSession& session,
                                                  std::chrono::milliseconds timeout) {
  return FormGroup(Cat("NCCL group, rank ", host_group.rank(), " of ", host_group.size()),
                   host_group, session, timeout);
}

StatusOr<std::unique_ptr<Communicator>> NcclGroup(const MpiRuntime& runtime,
                                                  Communicator& host_group,
                                                  const DeviceSession& session,
                                                  std::chrono::milliseconds timeout) {
  return FormGroup(
      Cat("NCCL group, rank ", host_group.rank(), " of ", host_group.size(), " (world rank ",
          runtime.world_rank(), ", local rank ", runtime.local_rank(), ")"),
      host_group, session, timeout);
}

}  // namespace ripplekv::kernels
