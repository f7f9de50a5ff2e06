#include "kernels/comm/thread_group.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/strings.h"

namespace ripplekv::kernels {

namespace {

using Clock = std::chrono::steady_clock;

// What one rank brings to a collective: the call, its buffer and its size.
struct Offer {
  std::string_view op;
  const void* data = nullptr;
  size_t count = 0;  // values (bytes for Broadcast)
  int root = -1;     // Broadcast's root
};

// The state the ranks of one group share. A collective is two arrivals: after the first, every
// rank's offer of the round is posted, and each rank reads the others' buffers; after the
// second, every rank has finished reading, so each may write its own buffer and go on to its
// next call (which posts a new offer).
class Shared {
 public:
  Shared(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), offers_(static_cast<size_t>(size)) {}

  int size() const { return size_; }

  // Runs one collective for `rank`: posts `mine`, waits for every rank's offer, checks that they
  // match, calls use(offers) (which reads the other ranks' buffers and may write the caller's
  // own), and waits until every rank is done reading.
  template <class Use>
  Status Exchange(int rank, const Offer& mine, Use use) {
    const auto deadline = Clock::now() + timeout_;
    RETURN_IF_ERROR(Arrive(rank, mine.op, deadline, &mine));
    // Every rank sees the same offers, so every rank reaches the same verdict.
    const std::string mismatch = Mismatch();
    if (mismatch.empty()) use(offers_);
    RETURN_IF_ERROR(Arrive(rank, mine.op, deadline, nullptr));
    if (!mismatch.empty()) return absl::InvalidArgumentError(Cat(mine.op, ": ", mismatch));
    return absl::OkStatus();
  }

  Status Usable(std::string_view op) {
    std::lock_guard lock(mu_);
    return broken_ ? Broken(op) : absl::OkStatus();
  }

 private:
  // Posts `offer` (when given) and waits until every rank of this round has arrived.
  Status Arrive(int rank, std::string_view op, Clock::time_point deadline, const Offer* offer) {
    std::unique_lock lock(mu_);
    if (broken_) return Broken(op);
    if (offer != nullptr) offers_[static_cast<size_t>(rank)] = *offer;
    const uint64_t round = round_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return absl::OkStatus();
    }
    cv_.wait_until(lock, deadline, [&] { return round_ != round || broken_; });
    if (round_ != round) return absl::OkStatus();
    if (broken_) return Broken(op);
    broken_ = true;
    why_ = Cat(op, ": rank ", rank, " of ", size_, " waited more than ", timeout_.count(),
               " ms for its peers");
    cv_.notify_all();
    return absl::DeadlineExceededError(why_);
  }

  Status Broken(std::string_view op) const {
    return absl::FailedPreconditionError(Cat(op, ": the thread group is broken (",
                                             why_.empty() ? "an earlier call failed" : why_, ")"));
  }

  // "" when every rank made the same call with the same size; else the calls, rank by rank.
  std::string Mismatch() const {
    bool same = true;
    for (const Offer& o : offers_) {
      same =
          same && o.op == offers_[0].op && o.count == offers_[0].count && o.root == offers_[0].root;
    }
    if (same) return "";
    std::string calls = "the ranks' calls differ:";
    for (size_t r = 0; r < offers_.size(); ++r) {
      calls += Cat(" rank ", r, " ", offers_[r].op, " of ", offers_[r].count);
      if (offers_[r].root >= 0) calls += Cat(" from ", offers_[r].root);
      calls += r + 1 < offers_.size() ? ";" : "";
    }
    return calls;
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;     // ranks waiting in this round (guarded by mu_)
  uint64_t round_ = 0;  // completed arrivals (guarded by mu_)
  bool broken_ = false;
  std::string why_;  // the timeout that broke the group
  // Written under mu_ by their own rank; read by all between a collective's two arrivals.
  std::vector<Offer> offers_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Shared> shared, int rank)
      : shared_(std::move(shared)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return shared_->size(); }
  CommunicatorStats stats() const override { return stats_; }

  Status AllReduceSum(const OpContext& ctx, const TensorView& x) override {
    RETURN_IF_ERROR(CheckHost("AllReduceSum", ctx, x.device));
    const auto n = static_cast<size_t>(x.numel());
    std::vector<float> sum(n);
    RETURN_IF_ERROR(Run({"AllReduceSum(tensor)", x.data, n}, [&](const std::vector<Offer>& all) {
      for (size_t i = 0; i < n; ++i) {
        float s = static_cast<const float*>(all[0].data)[i];
        for (size_t r = 1; r < all.size(); ++r) s += static_cast<const float*>(all[r].data)[i];
        sum[i] = s;
      }
    }));
    std::copy(sum.begin(), sum.end(), x.data);
    return absl::OkStatus();
  }

  Status AllGather(const OpContext& ctx, const ConstTensorView& in,
                   const TensorView& out) override {
    RETURN_IF_ERROR(CheckHost("AllGather", ctx, in.device));
    RETURN_IF_ERROR(CheckHost("AllGather", ctx, out.device));
    if (out.numel() != in.numel() * size()) {
      return absl::InvalidArgumentError(Cat("AllGather: out holds ", out.numel(), " values for ",
                                            size(), " ranks of ", in.numel()));
    }
    const auto n = static_cast<size_t>(in.numel());
    return Run({"AllGather", in.data, n}, [&](const std::vector<Offer>& all) {
      for (size_t r = 0; r < all.size(); ++r) {
        std::memmove(out.data + r * n, all[r].data, n * sizeof(float));
      }
    });
  }

  Status AllReduceSum(std::span<double> values) override {
    return ReduceHost("AllReduceSum", values, [](double a, double b) { return a + b; });
  }
  Status AllReduceMax(std::span<double> values) override {
    return ReduceHost("AllReduceMax", values, [](double a, double b) { return a > b ? a : b; });
  }

  Status Broadcast(std::span<uint8_t> bytes, int root) override {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(Cat("Broadcast: root ", root, " of ", size(), " ranks"));
    }
    return Run({"Broadcast", bytes.data(), bytes.size(), root}, [&](const std::vector<Offer>& all) {
      if (rank_ != root) std::memcpy(bytes.data(), all[root].data, bytes.size());
    });
  }

  Status Barrier() override {
    return Run({"Barrier", nullptr, 0}, [](const std::vector<Offer>&) {});
  }

 private:
  Status CheckHost(const char* op, const OpContext& ctx, Device device) const {
    RETURN_IF_ERROR(shared_->Usable(op));
    if (ctx.device != Device::kCpu || device != Device::kCpu) {
      return absl::InvalidArgumentError(
          Cat(op, ": the thread group moves host tensors only (an NCCL group moves CUDA ones)"));
    }
    return absl::OkStatus();
  }

  template <class Use>
  Status Run(const Offer& mine, Use use) {
    const auto start = Clock::now();
    RETURN_IF_ERROR(shared_->Exchange(rank_, mine, use));
    ++stats_.calls;
    stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return absl::OkStatus();
  }

  template <class Combine>
  Status ReduceHost(const char* op, std::span<double> values, Combine combine) {
    std::vector<double> result(values.size());
    RETURN_IF_ERROR(Run({op, values.data(), values.size()}, [&](const std::vector<Offer>& all) {
      for (size_t i = 0; i < values.size(); ++i) {
        double v = static_cast<const double*>(all[0].data)[i];
        for (size_t r = 1; r < all.size(); ++r) {
          v = combine(v, static_cast<const double*>(all[r].data)[i]);
        }
        result[i] = v;
      }
    }));
    std::copy(result.begin(), result.end(), values.begin());
    return absl::OkStatus();
  }

  const std::shared_ptr<Shared> shared_;
  const int rank_;
  CommunicatorStats stats_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Communicator>>> ThreadGroup(
    int size, std::chrono::milliseconds timeout) {
  if (size < 1) return absl::InvalidArgumentError(Cat("a thread group of ", size, " ranks"));
  auto shared = std::make_shared<Shared>(size, timeout);
  std::vector<std::unique_ptr<Communicator>> ranks;
  ranks.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadCommunicator>(shared, r));
  return ranks;
}

}  // namespace ripplekv::kernels
