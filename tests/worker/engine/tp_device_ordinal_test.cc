// TpDeviceOrdinal: which GPU a tensor-parallel rank opens, for the ways a node shows its GPUs to
// the ranks (every GPU to every rank, one GPU per rank, fewer GPUs than ranks).

#include <gtest/gtest.h>

#include "worker/engine/tp_group.h"

namespace ripplekv::worker {
namespace {

TEST(TpDeviceOrdinalTest, EveryRankSeeingEveryGpuTakesItsLocalRank) {
  for (int rank = 0; rank < 8; ++rank) {
    auto ordinal = TpDeviceOrdinal(0, rank, 8);
    ASSERT_TRUE(ordinal.ok()) << ordinal.status();
    EXPECT_EQ(*ordinal, rank);
  }
  EXPECT_EQ(*TpDeviceOrdinal(4, 1, 8), 5);  // --device cuda:4: the group's GPUs from 4
}

TEST(TpDeviceOrdinalTest, ARankShownOnlyItsOwnGpuTakesOrdinalZero) {
  // CUDA_VISIBLE_DEVICES per rank or --gpu-bind=single:1: ordinal 1, 2, ... would not exist.
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(*TpDeviceOrdinal(0, rank, 1), 0);
}

TEST(TpDeviceOrdinalTest, MoreRanksThanVisibleGpusWrap) {
  EXPECT_EQ(*TpDeviceOrdinal(0, 2, 2), 0);
  EXPECT_EQ(*TpDeviceOrdinal(1, 2, 2), 1);
}

TEST(TpDeviceOrdinalTest, NoVisibleDeviceOrANegativeInputIsAnError) {
  const auto none = TpDeviceOrdinal(0, 1, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("local rank 1 sees no device"), std::string::npos)
      << none.status();
  EXPECT_EQ(TpDeviceOrdinal(-1, 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TpDeviceOrdinal(0, -1, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::worker
