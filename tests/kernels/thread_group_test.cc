// The thread group (kernels/comm/thread_group.h): ranks that are threads of one process combine
// host values and host tensors as the Communicator contract says (rank-order sums, the same bits
// everywhere), calls that do not match fail alike on every rank, and a rank that never arrives
// breaks the group in bounded time.

#include "kernels/comm/thread_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace ripplekv::kernels {
namespace {

using ::testing::HasSubstr;

std::vector<std::unique_ptr<Communicator>> Group(int size, std::chrono::milliseconds timeout) {
  auto group = ThreadGroup(size, timeout);
  EXPECT_TRUE(group.ok()) << group.status();
  return std::move(*group);
}

// Runs body(rank's communicator) on one thread per rank, together, and waits for all.
void OnRanks(std::vector<std::unique_ptr<Communicator>>& group,
             const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (auto& c : group) threads.emplace_back([&body, &c] { body(*c); });
  for (auto& t : threads) t.join();
}

TEST(ThreadGroupTest, RefusesAGroupOfNoRanks) {
  EXPECT_EQ(ThreadGroup(0, std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ThreadGroupTest, SumsInRankOrderSoEveryRankHoldsTheSameBits) {
  auto group = Group(3, std::chrono::seconds(30));
  // Values whose float sum depends on the order: rank order is (1e8 + r0) + r1 + r2.
  auto values = [](int rank) {
    std::vector<float> v(8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = rank == 0 ? 1e8f : 3.0f + rank + 0.25f * i;
    return v;
  };
  std::vector<std::vector<float>> got(3);
  OnRanks(group, [&](Communicator& c) {
    std::vector<float> x = values(c.rank());
    ASSERT_TRUE(c.AllReduceSum(OpContext(), TensorView{x.data(), {2, 4}}).ok());
    got[c.rank()] = x;
    std::vector<double> sum = {1.0, static_cast<double>(c.rank())}, max = sum;
    ASSERT_TRUE(c.AllReduceSum(sum).ok());
    ASSERT_TRUE(c.AllReduceMax(max).ok());
    EXPECT_EQ(sum, (std::vector<double>{3.0, 3.0}));
    EXPECT_EQ(max, (std::vector<double>{1.0, 2.0}));
  });
  for (size_t i = 0; i < 8; ++i) {
    const float want = (values(0)[i] + values(1)[i]) + values(2)[i];
    for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r][i], want) << "rank " << r << ", value " << i;
  }
  EXPECT_EQ(group[0]->stats().calls, 3);
}

TEST(ThreadGroupTest, GathersInRankOrderAndBroadcastsFromTheRoot) {
  auto group = Group(3, std::chrono::seconds(30));
  OnRanks(group, [](Communicator& c) {
    const int me = c.rank();
    std::vector<float> mine = {static_cast<float>(me), static_cast<float>(10 * me)}, all(6);
    ASSERT_TRUE(
        c.AllGather(OpContext(), ConstTensorView(mine.data(), {2}), TensorView{all.data(), {6}})
            .ok());
    EXPECT_EQ(all, (std::vector<float>{0, 0, 1, 10, 2, 20}));
    std::vector<uint8_t> bytes(4, static_cast<uint8_t>(me));
    if (me == 2) bytes = {7, 8, 9, 10};
    ASSERT_TRUE(c.Broadcast(bytes, 2).ok());
    EXPECT_EQ(bytes, (std::vector<uint8_t>{7, 8, 9, 10}));
    EXPECT_TRUE(c.Barrier().ok());
  });
}

TEST(ThreadGroupTest, CallsThatDoNotMatchFailOnEveryRankAndMoveNothing) {
  auto group = Group(2, std::chrono::seconds(30));
  OnRanks(group, [](Communicator& c) {
    std::vector<double> v(c.rank() == 0 ? 2 : 3, 1.0);
    const Status status = c.AllReduceSum(v);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("rank 1 AllReduceSum of 3"));
    EXPECT_EQ(v, std::vector<double>(v.size(), 1.0));
    // Still in step.
    std::vector<double> one = {1.0};
    ASSERT_TRUE(c.AllReduceSum(one).ok());
    EXPECT_EQ(one[0], 2.0);
  });
}

TEST(ThreadGroupTest, RefusesDeviceTensorsAndRootsOutsideTheGroup) {
  auto group = Group(1, std::chrono::seconds(30));
  Communicator& c = *group[0];
  float x = 1.0f;
  OpContext cuda;
  cuda.device = Device::kCuda;
  EXPECT_EQ(c.AllReduceSum(cuda, TensorView{&x, {1}, Device::kCuda}).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> bytes(2);
  EXPECT_EQ(c.Broadcast(bytes, 1).code(), absl::StatusCode::kInvalidArgument);
  // One rank: every collective is its own result.
  ASSERT_TRUE(c.AllReduceSum(OpContext(), TensorView{&x, {1}}).ok());
  EXPECT_EQ(x, 1.0f);
}

TEST(ThreadGroupTest, ARankThatNeverArrivesBreaksTheGroupWithinTheTimeout) {
  constexpr std::chrono::milliseconds kTimeout{200};
  auto group = Group(2, kTimeout);
  const auto start = std::chrono::steady_clock::now();
  const Status waited = group[0]->Barrier();  // rank 1 never calls
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("Barrier: rank 0 of 2 waited more than 200 ms"));
  EXPECT_GE(took, kTimeout);
  EXPECT_LT(took, std::chrono::seconds(5));
  // Broken for every rank, the late one included.
  const Status late = group[1]->Barrier();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(late.message(), HasSubstr("waited more than 200 ms"));
  std::vector<double> v = {1.0};
  EXPECT_EQ(group[0]->AllReduceSum(v).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ripplekv::kernels
