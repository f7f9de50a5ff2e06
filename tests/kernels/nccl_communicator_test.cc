// The NCCL communicator (kernels/comm/nccl_communicator.h) under mpirun (labels mpi, gpu), on 1
// and on 2 ranks. Everywhere: NCCL loads without a GPU, and a group refuses a host session on
// every rank alike. With a CUDA device per rank: the device collectives against values every rank
// can compute, the host calls, and a collective that outlasts its timeout breaking the group.
// Device cases skip, saying why, without a device for every rank.

#include "kernels/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "kernels/comm/nccl_api.h"

namespace ripplekv::kernels {
namespace {

using ::testing::HasSubstr;

constexpr std::chrono::seconds kTimeout{60};

MpiRuntime& Runtime() { return **MpiRuntime::Init(nullptr, nullptr); }

std::unique_ptr<Communicator> HostWorld() {
  auto c = MpiGroup(Runtime(), Runtime().world_size(), kTimeout);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

// Why the device cases cannot run here ("" when they can): each rank needs a CUDA device of its
// own (the tests run on one node, so every rank sees the same count and decides alike) and NCCL.
std::string DevicesMissing() {
  const int count = DeviceCount(Device::kCuda);
  if (count == 0) return Cat("no CUDA device: ", DeviceUnavailableReason(Device::kCuda));
  if (count < Runtime().world_size()) {
    return Cat(count, " CUDA device(s) for ", Runtime().world_size(), " ranks");
  }
  std::string why;
  if (nccl::Nccl(&why) == nullptr) return why;
  return "";
}

Tensor OnDevice(const DeviceSession& session, const Shape& shape, std::span<const float> values) {
  return Tensor(shape, values).CopyTo(session.allocator());
}

TEST(NcclApiTest, LoadsAndResolvesEverySymbolWithoutAGpu) {
  std::string why;
  const nccl::NcclApi* api = nccl::Nccl(&why);
  if (api == nullptr) {
    if (why.rfind("cannot load NCCL", 0) == 0) GTEST_SKIP() << why;
    FAIL() << why;  // the library is there but lacks an entry point
  }
  for (bool resolved : {api->get_unique_id != nullptr, api->comm_init_rank_config != nullptr,
                        api->comm_get_async_error != nullptr, api->comm_finalize != nullptr,
                        api->comm_destroy != nullptr, api->comm_abort != nullptr,
                        api->all_reduce != nullptr, api->all_gather != nullptr}) {
    EXPECT_TRUE(resolved);
  }
  // The entry points that need no GPU answer.
  ASSERT_NE(api->get_version, nullptr);
  ASSERT_NE(api->get_error_string, nullptr);
  ASSERT_NE(api->get_last_error, nullptr);
  int version = 0;
  ASSERT_EQ(api->get_version(&version), ncclSuccess);
  EXPECT_GE(version, NCCL_VERSION(2, 14, 0));
  EXPECT_THAT(nccl::NcclErrorText(*api, ncclInvalidArgument), HasSubstr("invalid argument"));
}

TEST(NcclGroupTest, RefusesAHostSessionOnEveryRank) {
  auto host = HostWorld();
  auto session = DeviceSession::Open({Device::kCpu, 0}, 1);
  ASSERT_TRUE(session.ok()) << session.status();
  auto group = NcclGroup(Runtime(), *host, *session, kTimeout);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition) << group.status();
  EXPECT_THAT(group.status().message(),
              HasSubstr(nccl::Nccl(nullptr) != nullptr ? "not a CUDA device" : "NCCL"));
  // Every rank refused after the same host calls: the host group is still in step.
  EXPECT_TRUE(host->Barrier().ok());
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = DevicesMissing(); !why.empty()) GTEST_SKIP() << why;
    host_ = HostWorld();
    const int ordinal = Runtime().local_rank() % DeviceCount(Device::kCuda);
    auto session = DeviceSession::Open({Device::kCuda, ordinal}, 1);
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(std::move(*session));
    auto group = NcclGroup(Runtime(), *host_, *session_, kTimeout);
    ASSERT_TRUE(group.ok()) << group.status();
    nccl_ = std::move(*group);
  }

  const OpContext& ctx() const { return session_->context(); }

  std::unique_ptr<Communicator> host_;
  std::optional<DeviceSession> session_;
  std::unique_ptr<Communicator> nccl_;  // destroyed first
};

TEST_F(NcclCommunicatorTest, AllReduceSumGivesEveryRankTheSameSum) {
  const int n = nccl_->size(), me = nccl_->rank();
  EXPECT_EQ(n, Runtime().world_size());
  // Small integers: every summation order gives the exact sum.
  std::vector<float> values(15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(me + 1 + i);
  Tensor x = OnDevice(*session_, {3, 5}, values);
  ASSERT_TRUE(nccl_->AllReduceSum(ctx(), x.view()).ok());
  Tensor sum = x.ToHost();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(sum.data()[i], static_cast<float>(n * (n + 1) / 2 + n * i)) << i;
  }
  // Values whose float sum depends on the order: whatever NCCL's order, all ranks hold the same
  // bits, so the sum over ranks of each value is size() times its maximum.
  std::vector<float> uneven(64);
  for (size_t i = 0; i < uneven.size(); ++i) {
    uneven[i] = me == 0 ? 1e8f + static_cast<float>(i) : 1.0f + me * 1e-3f * i;
  }
  Tensor y = OnDevice(*session_, {64}, uneven);
  ASSERT_TRUE(nccl_->AllReduceSum(ctx(), y.view()).ok());
  Tensor got = y.ToHost();
  std::vector<double> mine(got.data(), got.data() + got.numel()), max = mine;
  ASSERT_TRUE(nccl_->AllReduceMax(max).ok());
  ASSERT_TRUE(nccl_->AllReduceSum(mine).ok());
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], n * max[i]) << i;
}

TEST_F(NcclCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const int n = nccl_->size(), me = nccl_->rank();
  const std::vector<float> mine = {static_cast<float>(me), static_cast<float>(10 * me)};
  Tensor in = OnDevice(*session_, {2}, mine);
  Tensor out(Shape{2 * static_cast<int64_t>(n)}, DType::kF32, session_->allocator());
  ASSERT_TRUE(nccl_->AllGather(ctx(), in.view(), out.view()).ok());
  Tensor all = out.ToHost();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(all.data()[2 * r], r);
    EXPECT_EQ(all.data()[2 * r + 1], 10 * r);
  }
  // Rejected arguments move nothing and leave the group usable.
  Tensor wrong(Shape{3}, DType::kF32, session_->allocator());
  EXPECT_EQ(nccl_->AllGather(ctx(), in.view(), wrong.view()).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor on_host({2});
  EXPECT_EQ(nccl_->AllReduceSum(ctx(), on_host.view()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nccl_->AllReduceSum(OpContext(), out.view()).code(),
            absl::StatusCode::kInvalidArgument);  // a host context
  EXPECT_TRUE(nccl_->AllGather(ctx(), in.view(), out.view()).ok());
}

TEST_F(NcclCommunicatorTest, HostCallsGoThroughTheHostGroup) {
  const int n = nccl_->size(), me = nccl_->rank();
  std::vector<double> sum = {static_cast<double>(me), 1.0}, max = {static_cast<double>(me)};
  ASSERT_TRUE(nccl_->AllReduceSum(sum).ok());
  EXPECT_EQ(sum, (std::vector<double>{n * (n - 1) / 2.0, static_cast<double>(n)}));
  ASSERT_TRUE(nccl_->AllReduceMax(max).ok());
  EXPECT_EQ(max[0], n - 1);
  std::vector<uint8_t> bytes(5, static_cast<uint8_t>(me));
  if (me == n - 1) bytes = {1, 2, 3, 4, 5};
  ASSERT_TRUE(nccl_->Broadcast(bytes, n - 1).ok());
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(nccl_->Barrier().ok());
}

// Stalls the stream it is queued on (a peer that never arrives looks the same to the waiting
// rank): the collective queued behind it cannot complete within the group's timeout.
void CUDART_CB Stall(void* seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(*static_cast<const int*>(seconds)));
}

TEST_F(NcclCommunicatorTest, ACollectiveThatOutlastsItsTimeoutBreaksTheGroup) {
  // Long enough for NCCL to form the group; the stall ends soon after, so the abort that the
  // timeout triggers never waits long for the stream.
  constexpr std::chrono::seconds kShort{5};
  static int stall_seconds = static_cast<int>(kShort.count()) + 2;  // outlives the stream's work
  auto group = NcclGroup(Runtime(), *host_, *session_, kShort);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& c = **group;
  Tensor x = OnDevice(*session_, {4}, std::vector<float>{1, 2, 3, 4});
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(ctx().stream), Stall, &stall_seconds),
            cudaSuccess);
  const Status timed_out = c.AllReduceSum(ctx(), x.view());
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_THAT(timed_out.message(), HasSubstr("AllReduceSum"));
  // Broken: every later call is refused, host calls too.
  EXPECT_EQ(c.AllReduceSum(ctx(), x.view()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.AllGather(ctx(), x.view(), x.view()).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<double> v = {1.0};
  EXPECT_EQ(c.AllReduceSum(v).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Barrier().code(), absl::StatusCode::kFailedPrecondition);
  group->reset();
  // The stream drains once the stall ends; the group the fixture made still works.
  EXPECT_TRUE(session_->Synchronize().ok());
  EXPECT_TRUE(nccl_->AllReduceSum(ctx(), x.view()).ok());
}

}  // namespace
}  // namespace ripplekv::kernels
