// The NCCL communicator (kernels/comm/nccl_communicator.h) under mpirun (labels mpi, gpu), on 1
// and on 2 ranks. Everywhere: NCCL loads without a GPU, and a group refuses a host session on
// every rank alike. With a CUDA device per rank: the device collectives against values every rank
// can compute, the host calls, and a collective that outlasts its timeout breaking the group.
// Device cases skip, saying why, without a device for every rank.

#include "kernels/comm/nccl_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "kernels/comm/nccl_api.h"
#include "tests/kernels/nccl_checks.h"

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
  nccl_checks::AllReduceSumGivesEveryRankTheSameSum(*nccl_, *session_);
}

TEST_F(NcclCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  nccl_checks::AllGatherConcatenatesInRankOrder(*nccl_, *session_);
}

TEST_F(NcclCommunicatorTest, HostCallsGoThroughTheHostGroup) {
  nccl_checks::HostCallsGoThroughTheHostGroup(*nccl_);
}

TEST_F(NcclCommunicatorTest, ACollectiveThatOutlastsItsTimeoutBreaksTheGroup) {
  nccl_checks::ACollectiveThatOutlastsItsTimeoutBreaksTheGroup(
      *nccl_, *session_, [&](std::chrono::seconds timeout) {
        return NcclGroup(Runtime(), *host_, *session_, timeout);
      });
}

}  // namespace
}  // namespace ripplekv::kernels
