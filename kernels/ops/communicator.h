#pragma once
// Collective operations over the ranks of one tensor-parallel worker (docs/DESIGN.md §3.2): the
// ranks hold one shard of the model each and combine partial results with these calls. An
// OpContext carries a pointer to one (null for a model held whole by one rank).
//
// Contract of every implementation:
//   * Every rank of the group makes the same calls in the same order with the same sizes.
//   * Sums are formed in rank order on every rank, so all ranks hold bit-identical results and a
//     result does not depend on the transport's reduction algorithm.
//   * A call that does not complete within the communicator's timeout returns DeadlineExceeded
//     naming the call; the communicator is then broken (every later call fails with
//     FailedPrecondition) and the process should leave the group (a worker exits, and its launcher
//     tears down the other ranks).

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// What a communicator's calls cost so far (for the all-reduce share of a run's time).
struct CommunicatorStats {
  int64_t calls = 0;     // collectives completed
  double seconds = 0.0;  // wall time inside them, waiting for peers included
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // Totals since creation; zeros where an implementation does not count.
  virtual CommunicatorStats stats() const { return {}; }

  // This rank's index in [0, size()), and the number of ranks.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: x (fp32, on ctx's device, the same shape on every rank) becomes the element-wise
  // sum over ranks.
  [[nodiscard]] virtual Status AllReduceSum(const OpContext& ctx, const TensorView& x) = 0;
  // In place on host values: the sum (or maximum) over ranks, element by element.
  [[nodiscard]] virtual Status AllReduceSum(std::span<double> values) = 0;
  [[nodiscard]] virtual Status AllReduceMax(std::span<double> values) = 0;
  // out = the `in` of every rank, concatenated in rank order (out.numel() == size() * in.numel()).
  [[nodiscard]] virtual Status AllGather(const OpContext& ctx, const ConstTensorView& in,
                                         const TensorView& out) = 0;
  // `bytes` of rank `root` to every rank (the same size everywhere).
  [[nodiscard]] virtual Status Broadcast(std::span<uint8_t> bytes, int root) = 0;
  [[nodiscard]] virtual Status Barrier() = 0;
};

}  // namespace ripplekv::kernels
