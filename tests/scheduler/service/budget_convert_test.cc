// The budget conversions of scheduler/service/convert.h and proto/budget_params.h for per-head
// maps: BudgetParams.per_head reaches the method's options and comes back in a map's parameters,
// and a per-head map's head budgets cross into BudgetMap.head_tokens (a per-layer map has none).

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "method/budget_map.h"
#include "proto/budget_params.h"
#include "scheduler/service/convert.h"
#include "tests/common/per_head_map.h"

namespace ripplekv::scheduler::service {
namespace {

method::BudgetMap PerHeadMap() { return testing::PerHeadExampleMap("ab"); }

TEST(BudgetConvertTest, PerHeadCrossesBothWays) {
  v1::BudgetParams params;
  params.set_average_tokens(100);
  StatusOr<BudgetRequest> per_layer = BudgetRequestFromProto(params);
  ASSERT_TRUE(per_layer.ok()) << per_layer.status();
  EXPECT_FALSE(per_layer->options.per_head);
  params.set_per_head(true);
  StatusOr<BudgetRequest> per_head = BudgetRequestFromProto(params);
  ASSERT_TRUE(per_head.ok()) << per_head.status();
  EXPECT_TRUE(per_head->options.per_head);
  EXPECT_TRUE(v1::BudgetParamsFromOptions(per_head->options).per_head());
  EXPECT_FALSE(v1::BudgetParamsFromOptions(per_layer->options).per_head());
}

TEST(BudgetConvertTest, APerHeadMapCarriesItsHeadBudgets) {
  const method::BudgetMap map = PerHeadMap();
  const v1::BudgetMap out = BudgetMapToProto(map, BudgetRequest{.options = map.options}, 1, "{}");
  EXPECT_TRUE(out.params().per_head());
  ASSERT_EQ(out.head_tokens_size(), 3);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(std::vector<int64_t>(out.head_tokens(l).tokens().begin(),
                                   out.head_tokens(l).tokens().end()),
              map.head_tokens[l])
        << "layer " << l;
  }
  EXPECT_EQ(out.tokens_size(), 3);
  EXPECT_EQ(out.tokens(1), 182);

  method::BudgetMap per_layer = map;
  per_layer.head_tokens.clear();
  per_layer.options.per_head = false;
  const v1::BudgetMap plain =
      BudgetMapToProto(per_layer, BudgetRequest{.options = per_layer.options}, 1, "{}");
  EXPECT_EQ(plain.head_tokens_size(), 0);
  EXPECT_FALSE(plain.params().per_head());
}

}  // namespace
}  // namespace ripplekv::scheduler::service
