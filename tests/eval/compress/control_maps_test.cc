#include "eval/compress/control_maps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "eval/compress/method.h"

namespace ripplekv::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

// Distinct sensitivities of 12 layers, rising with the layer except near the top.
const std::vector<double> kValues = {0.01, 0.02, 0.015, 0.04, 0.05, 0.03,
                                     0.08, 0.07, 0.12,  0.2,  0.5,  0.3};

method::BudgetOptions Options(double ratio, int64_t average) {
  method::BudgetOptions o;
  o.ratio = ratio;
  o.average_tokens = average;
  o.min_tokens = 8;
  return o;
}

MATCHER_P2(IsControl, kind, seed, "") { return arg.kind == kind && arg.seed == seed; }

TEST(ControlMapsTest, ParsesTheControlNames) {
  EXPECT_THAT(ParseMapControl("ripple"), Optional(IsControl(MapControlKind::kNone, 0u)));
  EXPECT_THAT(ParseMapControl("map"), Optional(IsControl(MapControlKind::kNone, 0u)));
  EXPECT_THAT(ParseMapControl("ripple-rev"), Optional(IsControl(MapControlKind::kReversed, 0u)));
  EXPECT_THAT(ParseMapControl("ripple-perm7"), Optional(IsControl(MapControlKind::kPermuted, 7u)));
  EXPECT_THAT(ParseMapControl("spike12"), Optional(IsControl(MapControlKind::kSpike, 12u)));
  for (const char* bad : {"ripple-perm", "ripple-perm0", "ripple-perm07", "ripple-perm1x", "spike",
                          "spike-1", "ripple-reversed", "uniform", "perm3", ""}) {
    EXPECT_FALSE(ParseMapControl(bad).has_value()) << bad;
  }
}

TEST(ControlMapsTest, ControlsAreMapMethodsWithEverySelection) {
  for (const char* name : {"ripple-perm3+snapkv", "ripple-rev+h2o", "spike1+cake"}) {
    auto m = ParseMethod(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->allocation, AllocationKind::kMap) << name;
    EXPECT_EQ(m->name, name);
  }
  // Without k the name is the CLI's shorthand for k = 1..n, not a method.
  const auto bare = ParseMethod("ripple-perm+snapkv");
  ASSERT_FALSE(bare.ok());
  EXPECT_THAT(bare.status().message(), ::testing::HasSubstr("ripple-perm<k>+S"));
  EXPECT_FALSE(ParseMethod("spike0+h2o").ok());
  EXPECT_FALSE(ParseMethod("ripple-rev+bogus").ok());
}

TEST(ControlMapsTest, ControlsWithoutKExpandToEverySeed) {
  EXPECT_THAT(ExpandMapControl("ripple-perm+snapkv", 3),
              ElementsAre("ripple-perm1+snapkv", "ripple-perm2+snapkv", "ripple-perm3+snapkv"));
  EXPECT_THAT(ExpandMapControl("spike+h2o", 2), ElementsAre("spike1+h2o", "spike2+h2o"));
  for (const char* alone : {"ripple+snapkv", "ripple-perm4+snapkv", "ripple-rev+h2o", "snapkv"}) {
    EXPECT_THAT(ExpandMapControl(alone, 3), ElementsAre(alone));
  }
}

TEST(ControlMapsTest, PermutationsAreSeededPermutations) {
  const std::vector<double> p1 = ControlValues(kValues, {MapControlKind::kPermuted, 1});
  const std::vector<double> again = ControlValues(kValues, {MapControlKind::kPermuted, 1});
  const std::vector<double> p2 = ControlValues(kValues, {MapControlKind::kPermuted, 2});
  EXPECT_EQ(p1, again);  // deterministic
  EXPECT_NE(p1, p2);     // seeds differ
  EXPECT_NE(p1, kValues);
  std::vector<double> sorted = p1, expected = kValues;
  std::sort(sorted.begin(), sorted.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(sorted, expected);  // the same values, moved
  // Ten seeds give ten different orders.
  std::set<std::vector<double>> orders;
  for (uint64_t k = 1; k <= 10; ++k)
    orders.insert(ControlValues(kValues, {MapControlKind::kPermuted, k}));
  EXPECT_EQ(orders.size(), 10u);
}

TEST(ControlMapsTest, ReversedAndUnchanged) {
  EXPECT_THAT(ControlValues(std::vector<double>{1, 2, 3}, {MapControlKind::kReversed, 0}),
              ElementsAre(3, 2, 1));
  EXPECT_EQ(ControlValues(kValues, {}), kValues);
  EXPECT_EQ(ControlValues(kValues, {MapControlKind::kSpike, 4}), kValues);
}

TEST(ControlMapsTest, TheProfilesOwnMapIsRippleKVsMap) {
  const auto own = ControlMap(kValues, Options(8, 64), {});
  const auto direct = method::ComputeBudgetMap(kValues, Options(8, 64));
  ASSERT_TRUE(own.ok() && direct.ok());
  EXPECT_EQ(*own, direct->tokens);
}

TEST(ControlMapsTest, PermutedAndReversedMapsSpendTheSameBudgetsElsewhere) {
  const std::vector<int64_t> ripple = *ControlMap(kValues, Options(8, 64), {});
  for (MapControl c :
       {MapControl{MapControlKind::kPermuted, 1}, MapControl{MapControlKind::kPermuted, 5},
        MapControl{MapControlKind::kReversed, 0}}) {
    const auto map = ControlMap(kValues, Options(8, 64), c);
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_NE(*map, ripple);
    EXPECT_EQ(std::accumulate(map->begin(), map->end(), int64_t{0}), 12 * 64);
    // Distinct values: the permuted map is RippleKV's map with its layers moved.
    std::vector<int64_t> a = *map, b = ripple;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
  }
  // Layer l of the reversed map gets what layer L-1-l gets in RippleKV's.
  const auto reversed = *ControlMap(kValues, Options(8, 64), {MapControlKind::kReversed, 0});
  EXPECT_EQ(reversed.front(), ripple.back());
  EXPECT_EQ(reversed.back(), ripple.front());
}

TEST(ControlMapsTest, SpikeGivesOneLayerTheLargestBudgetAndSplitsTheRestEvenly) {
  // Hand-computed: total 100, largest 40 -> the other 3 layers share 60 = 20 each.
  const auto spike = SpikeMap(std::vector<int64_t>{10, 40, 30, 20}, 1, 3);
  ASSERT_TRUE(spike.ok()) << spike.status();
  EXPECT_EQ(std::accumulate(spike->begin(), spike->end(), int64_t{0}), 100);
  EXPECT_EQ(std::count(spike->begin(), spike->end(), 40), 1);
  EXPECT_EQ(std::count(spike->begin(), spike->end(), 20), 3);
  // 61 left over 3 layers: 21, 20, 20 (the extra token to the lower layer).
  const auto odd = SpikeMap(std::vector<int64_t>{10, 40, 30, 21}, 1, 3);
  ASSERT_TRUE(odd.ok());
  std::vector<int64_t> rest;
  for (int64_t b : *odd) {
    if (b != 40) rest.push_back(b);
  }
  EXPECT_THAT(rest, ElementsAre(21, 20, 20));
  // The spiked layer is a seeded draw: over seeds 1..40 it lands on every layer of 4.
  std::set<size_t> where;
  for (uint64_t k = 1; k <= 40; ++k) {
    const auto m = *SpikeMap(std::vector<int64_t>{10, 40, 30, 20}, 1, k);
    where.insert(std::max_element(m.begin(), m.end()) - m.begin());
    EXPECT_EQ(m, *SpikeMap(std::vector<int64_t>{10, 40, 30, 20}, 1, k));
  }
  EXPECT_EQ(where.size(), 4u);
}

TEST(ControlMapsTest, SpikeOfRippleKVsMapAtTheSameMemory) {
  const std::vector<int64_t> ripple = *ControlMap(kValues, Options(8, 64), {});
  const auto spike = ControlMap(kValues, Options(8, 64), {MapControlKind::kSpike, 2});
  ASSERT_TRUE(spike.ok()) << spike.status();
  EXPECT_EQ(std::accumulate(spike->begin(), spike->end(), int64_t{0}), 12 * 64);
  EXPECT_EQ(*std::max_element(spike->begin(), spike->end()),
            *std::max_element(ripple.begin(), ripple.end()));
  for (int64_t b : *spike) EXPECT_GE(b, 8);
}

TEST(ControlMapsTest, SpikeRefusesWhatCannotBeBuilt) {
  EXPECT_FALSE(SpikeMap(std::vector<int64_t>{}, 1, 1).ok());
  EXPECT_FALSE(SpikeMap(std::vector<int64_t>{1, 2}, 1, 0).ok());
  // 10 + 10 + 80: the 20 left cannot give two layers 16 each.
  const auto tight = SpikeMap(std::vector<int64_t>{10, 10, 80}, 16, 1);
  ASSERT_FALSE(tight.ok());
  EXPECT_THAT(tight.status().message(), ::testing::HasSubstr("do not fit"));
}

}  // namespace
}  // namespace ripplekv::eval
