// The frozen-map document (method/frozen_map.h): canonical text, strict reading, rendering.

#include "method/frozen_map.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ripplekv::method {
namespace {

FrozenMap Example() {
  BudgetOptions options{.ratio = 2.0, .average_tokens = 100, .max_context = 1024};
  StatusOr<BudgetMap> map = ComputeBudgetMap(std::vector<double>{0.2, 0.1, 0.4}, options);
  EXPECT_TRUE(map.ok()) << map.status();
  map->model_hash = std::string(64, 'c');
  return {.profile_version = 3,
          .selection = {.method = "snapkv", .params = {{"window", "32"}, {"kernel", "7"}}},
          .map = *map};
}

TEST(FrozenMapTest, RoundTripsAndIsCanonical) {
  const FrozenMap frozen = Example();
  StatusOr<std::string> text = FrozenMapToJson(frozen);
  ASSERT_TRUE(text.ok()) << text.status();
  // Parameters are sorted whatever order they were given in; keys come in a fixed order.
  EXPECT_LT(text->find("\"kernel\""), text->find("\"window\""));
  EXPECT_LT(text->find("\"schema_version\""), text->find("\"model_hash\""));
  EXPECT_LT(text->find("\"selection\""), text->find("\"map\""));
  StatusOr<FrozenMap> back = FrozenMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->profile_version, 3u);
  EXPECT_EQ(back->selection, frozen.selection);
  EXPECT_EQ(back->map.tokens, frozen.map.tokens);
  EXPECT_EQ(back->map.multipliers, frozen.map.multipliers);
  // Same document again: the same bytes.
  StatusOr<std::string> again = FrozenMapToJson(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *text);
}

TEST(FrozenMapTest, ReadingIsStrict) {
  StatusOr<std::string> text = FrozenMapToJson(Example());
  ASSERT_TRUE(text.ok());
  std::string extra = *text;
  extra.insert(1, "\"surprise\": 1,");
  StatusOr<FrozenMap> parsed = FrozenMapFromJson(extra);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("surprise"), std::string::npos) << parsed.status();

  std::string other_hash = *text;
  other_hash.replace(other_hash.find(std::string(64, 'c')), 64, std::string(64, 'd'));
  parsed = FrozenMapFromJson(other_hash);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("map.model_hash"), std::string::npos) << parsed.status();

  std::string bad_tokens = *text;
  const size_t tokens = bad_tokens.find("\"tokens\": ") + 10;
  bad_tokens.insert(tokens, "1");  // the layer budgets no longer sum to the total
  parsed = FrozenMapFromJson(bad_tokens);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().find("frozen map: map."), 0u) << parsed.status();

  EXPECT_FALSE(FrozenMapFromJson("{").ok());
  EXPECT_FALSE(FrozenMapFromJson("[]").ok());
  EXPECT_EQ(FrozenMapFromJson(R"({"schema_version": 2})").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(FrozenMapTest, SelectionIntentLimits) {
  FrozenMap frozen = Example();
  frozen.selection.method = "SnapKV";
  EXPECT_EQ(FrozenMapToJson(frozen).status().code(), absl::StatusCode::kInvalidArgument);
  frozen.selection.method = "pyramidkv+h2o";
  EXPECT_TRUE(FrozenMapToJson(frozen).ok());
  frozen.selection.params[""] = "x";
  StatusOr<std::string> empty_key = FrozenMapToJson(frozen);
  EXPECT_EQ(empty_key.status().code(), absl::StatusCode::kInvalidArgument);
  frozen.selection.params.erase("");
  frozen.selection.params["window"] = std::string(300, 'x');
  EXPECT_EQ(FrozenMapToJson(frozen).status().code(), absl::StatusCode::kInvalidArgument);
  frozen = Example();
  frozen.profile_version = 0;
  EXPECT_EQ(FrozenMapToJson(frozen).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrozenMapTest, RendersEachFormatWithTheMapsContextLength) {
  const FrozenMap frozen = Example();
  StatusOr<std::string> native = RenderFrozenMap(frozen, BudgetFormat::kNative);
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(*native, *BudgetMapToJson(frozen.map));
  StatusOr<std::string> kvpress = RenderFrozenMap(frozen, BudgetFormat::kKvpress);
  ASSERT_TRUE(kvpress.ok()) << kvpress.status();
  EXPECT_EQ(*kvpress, *FormatBudgetMap(frozen.map, BudgetFormat::kKvpress, 1024));
  StatusOr<std::string> trtllm = RenderFrozenMap(frozen, BudgetFormat::kTrtllm);
  ASSERT_TRUE(trtllm.ok());
  EXPECT_NE(trtllm->find("max_attention_window"), std::string::npos);
  FrozenMap no_context = frozen;
  no_context.map.options.max_context.reset();
  EXPECT_EQ(RenderFrozenMap(no_context, BudgetFormat::kKvpress).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ripplekv::method
