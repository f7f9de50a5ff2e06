#include "kernels/comm/mpi_communicator.h"

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.h"

namespace ripplekv::kernels {

namespace {

using Clock = std::chrono::steady_clock;

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout)
      : comm_(comm), timeout_(timeout) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    if (!broken_) MPI_Comm_free(&comm_);  // a broken one may still have a request in flight
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommunicatorStats stats() const override { return stats_; }

  Status AllReduceSum(const OpContext& ctx, const TensorView& x) override {
    RETURN_IF_ERROR(CheckHost("AllReduceSum", ctx, x.device));
    const auto n = static_cast<size_t>(x.numel());
    std::vector<float> all(n * size_);
    RETURN_IF_ERROR(Gather("AllReduceSum", x.data, all.data(), n, MPI_FLOAT));
    for (size_t i = 0; i < n; ++i) {
      float sum = all[i];
      for (int r = 1; r < size_; ++r) sum += all[r * n + i];
      x.data[i] = sum;
    }
    return absl::OkStatus();
  }

  Status AllReduceSum(std::span<double> values) override {
    return ReduceHost("AllReduceSum", values, [](double a, double b) { return a + b; });
  }
  Status AllReduceMax(std::span<double> values) override {
    return ReduceHost("AllReduceMax", values, [](double a, double b) { return a > b ? a : b; });
  }

  Status AllGather(const OpContext& ctx, const ConstTensorView& in,
                   const TensorView& out) override {
    RETURN_IF_ERROR(CheckHost("AllGather", ctx, in.device));
    RETURN_IF_ERROR(CheckHost("AllGather", ctx, out.device));
    if (out.numel() != in.numel() * size_) {
      return absl::InvalidArgumentError(Cat("AllGather: out holds ", out.numel(), " values for ",
                                            size_, " ranks of ", in.numel()));
    }
    return Gather("AllGather", in.data, out.data, static_cast<size_t>(in.numel()), MPI_FLOAT);
  }

  Status Broadcast(std::span<uint8_t> bytes, int root) override {
    RETURN_IF_ERROR(Usable("Broadcast"));
    MPI_Request request;
    MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, comm_, &request);
    return Wait("Broadcast", request);
  }

  Status Barrier() override {
    RETURN_IF_ERROR(Usable("Barrier"));
    MPI_Request request;
    MPI_Ibarrier(comm_, &request);
    return Wait("Barrier", request);
  }

 private:
  Status Usable(const char* op) const {
    if (broken_) {
      return absl::FailedPreconditionError(
          Cat(op, ": the communicator is broken (an earlier collective timed out)"));
    }
    return absl::OkStatus();
  }
  Status CheckHost(const char* op, const OpContext& ctx, Device device) const {
    RETURN_IF_ERROR(Usable(op));
    if (ctx.device != Device::kCpu || device != Device::kCpu) {
      return absl::InvalidArgumentError(Cat(op, ": the MPI communicator moves host tensors only"));
    }
    return absl::OkStatus();
  }

  // all[r * n .. (r + 1) * n) = rank r's `mine`.
  Status Gather(const char* op, const void* mine, void* all, size_t n, MPI_Datatype type) {
    RETURN_IF_ERROR(Usable(op));
    MPI_Request request;
    const int code = MPI_Iallgather(mine, static_cast<int>(n), type, all, static_cast<int>(n), type,
                                    comm_, &request);
    if (code != MPI_SUCCESS) return absl::InternalError(Cat(op, ": ", MpiError(code)));
    return Wait(op, request);
  }

  template <class Combine>
  Status ReduceHost(const char* op, std::span<double> values, Combine combine) {
    const size_t n = values.size();
    std::vector<double> all(n * size_);
    RETURN_IF_ERROR(Gather(op, values.data(), all.data(), n, MPI_DOUBLE));
    for (size_t i = 0; i < n; ++i) {
      double v = all[i];
      for (int r = 1; r < size_; ++r) v = combine(v, all[r * n + i]);
      values[i] = v;
    }
    return absl::OkStatus();
  }

  // Polls `request` until it completes or the timeout passes (then the communicator is broken).
  Status Wait(const char* op, MPI_Request& request) {
    const auto start = Clock::now();
    const auto deadline = start + timeout_;
    for (int polls = 0;; ++polls) {
      int done = 0;
      const int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) {
        broken_ = true;
        return absl::InternalError(Cat(op, ": ", MpiError(code)));
      }
      if (done) {
        ++stats_.calls;
        stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
        return absl::OkStatus();
      }
      if (Clock::now() > deadline) {
        broken_ = true;
        return absl::DeadlineExceededError(Cat(op, ": rank ", rank_, " of ", size_,
                                               " waited more than ", timeout_.count(),
                                               " ms for its peers"));
      }
      // Spin briefly (collectives inside a forward pass finish in microseconds), then back off.
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
  bool broken_ = false;
  CommunicatorStats stats_;
};

}  // namespace

bool MpiRuntime::Launched() {
  // OpenMPI's mpirun; PMI-1/2 launchers; PMIx servers (Slurm's `srun --mpi=pmix`, prterun).
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

StatusOr<MpiRuntime*> MpiRuntime::Init(int* argc, char*** argv) {
  static MpiRuntime* runtime = nullptr;
  if (runtime != nullptr) return runtime;
  int provided = 0;
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS) return absl::InternalError(Cat("MPI_Init_thread: ", MpiError(code)));
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  auto* r = new MpiRuntime();  // lives for the process
  MPI_Comm_rank(MPI_COMM_WORLD, &r->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &r->world_size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->world_rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &r->local_rank_);
  MPI_Comm_free(&node);
  runtime = r;
  return runtime;
}

void MpiRuntime::Abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

StatusOr<std::unique_ptr<Communicator>> MpiGroup(const MpiRuntime& runtime, int group_size,
                                                 std::chrono::milliseconds timeout) {
  if (group_size < 1 || runtime.world_size() % group_size != 0) {
    return absl::InvalidArgumentError(Cat("tensor-parallel degree ", group_size,
                                          " does not divide the ", runtime.world_size(),
                                          " MPI ranks"));
  }
  MPI_Comm group;
  const int code = MPI_Comm_split(MPI_COMM_WORLD, runtime.world_rank() / group_size,
                                  runtime.world_rank(), &group);
  if (code != MPI_SUCCESS) return absl::InternalError(Cat("MPI_Comm_split: ", MpiError(code)));
  return std::unique_ptr<Communicator>(new MpiCommunicator(group, timeout));
}

}  // namespace ripplekv::kernels
