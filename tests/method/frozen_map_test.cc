// The frozen-map document (method/frozen_map.h): canonical text, strict reading, rendering.

#include "method/frozen_map.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/per_head_map.h"

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
  EXPECT_EQ(FrozenMapFromJson(R"({"schema_version": 3})").status().code(),
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

// A noise map's document as written before maps recorded their profile's objective: it reads as
// a noise map and is written back byte for byte, so its version id (the hash of these bytes)
// does not change.
constexpr std::string_view kVersionOneDocument = R"({
  "schema_version": 1,
  "model_hash": "ab12",
  "profile_version": 1,
  "selection": {
    "method": "snapkv",
    "params": {}
  },
  "map": {
    "schema_version": 1,
    "model_hash": "ab12",
    "params": {
      "normalization": "minmax",
      "ratio": 2.0,
      "average_tokens": 10,
      "total_tokens": null,
      "min_tokens": 1,
      "max_tokens": null,
      "log_epsilon": 1e-12,
      "max_context": null
    },
    "total_tokens": 20,
    "layers": [
      {
        "layer": 0,
        "tokens": 13,
        "multiplier": 2.0,
        "normalized": 1.0
      },
      {
        "layer": 1,
        "tokens": 7,
        "multiplier": 1.0,
        "normalized": 0.0
      }
    ]
  }
}
)";

TEST(FrozenMapTest, AVersionOneDocumentIsANoiseMapWithUnchangedBytes) {
  StatusOr<FrozenMap> frozen = FrozenMapFromJson(kVersionOneDocument);
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  EXPECT_EQ(frozen->map.objective, Objective::kNoise);
  StatusOr<std::string> text = FrozenMapToJson(*frozen);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, kVersionOneDocument);
  // A version 1 document has no objective.
  std::string with_objective(kVersionOneDocument);
  with_objective.insert(with_objective.find("\"selection\""), "\"objective\": \"response\", ");
  StatusOr<FrozenMap> parsed = FrozenMapFromJson(with_objective);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("objective"), std::string::npos) << parsed.status();
}

FrozenMap ResponseExample() {
  FrozenMap frozen = Example();
  frozen.map.objective = Objective::kResponse;
  frozen.map.selector = ResponseSelector::kH2o;
  return frozen;
}

TEST(FrozenMapTest, AResponseMapRecordsItsObjectiveAndSelectorInVersionTwo) {
  StatusOr<std::string> text = FrozenMapToJson(ResponseExample());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("\"schema_version\": 2"), std::string::npos) << *text;
  EXPECT_LT(text->find("\"profile_version\""), text->find("\"objective\": \"response\""));
  EXPECT_LT(text->find("\"objective\""), text->find("\"selector\": \"h2o\""));
  EXPECT_LT(text->find("\"selector\""), text->find("\"selection\""));
  StatusOr<FrozenMap> back = FrozenMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->map.objective, Objective::kResponse);
  EXPECT_EQ(back->map.selector, ResponseSelector::kH2o);
  EXPECT_EQ(back->map.tokens, ResponseExample().map.tokens);
  StatusOr<std::string> again = FrozenMapToJson(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *text);
  // The same budgets from a noise profile are another document (another version).
  EXPECT_NE(*text, *FrozenMapToJson(Example()));
  // What serving nodes get is the native map alone, the same for both.
  EXPECT_EQ(*RenderFrozenMap(*back, BudgetFormat::kNative),
            *RenderFrozenMap(Example(), BudgetFormat::kNative));
}

TEST(FrozenMapTest, AVersionTwoDocumentIsStrictAboutItsObjective) {
  StatusOr<std::string> text = FrozenMapToJson(ResponseExample());
  ASSERT_TRUE(text.ok()) << text.status();
  auto error = [](const std::string& document) {
    StatusOr<FrozenMap> parsed = FrozenMapFromJson(document);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(parsed.status().message());
  };
  std::string noise = *text;
  noise.replace(noise.find("\"response\""), 10, "\"noise\"");
  EXPECT_NE(error(noise).find("objective: is \"noise\""), std::string::npos) << error(noise);
  std::string no_selector = *text;
  no_selector.erase(no_selector.find("\"selector\""), std::string("\"selector\": \"h2o\",").size());
  EXPECT_NE(error(no_selector).find("selector: missing"), std::string::npos) << error(no_selector);
  std::string other_selector = *text;
  other_selector.replace(other_selector.find("\"h2o\""), 5, "\"tova\"");
  EXPECT_NE(error(other_selector).find("selector: unknown response selector \"tova\""),
            std::string::npos)
      << error(other_selector);
  std::string no_objective = *text;
  no_objective.erase(no_objective.find("\"objective\""),
                     std::string("\"objective\": \"response\",").size());
  EXPECT_NE(error(no_objective).find("objective: missing"), std::string::npos)
      << error(no_objective);
}

// A response map of three layers of two KV heads (budget_format_test.cc has the invariants).
FrozenMap PerHeadExample() {
  FrozenMap frozen = ResponseExample();
  const ResponseSelector selector = frozen.map.selector;
  frozen.map = testing::PerHeadExampleMap(frozen.map.model_hash, /*max_context=*/1024);
  frozen.map.selector = selector;
  return frozen;
}

TEST(FrozenMapTest, APerHeadMapEmbedsNativeVersionTwoUnderTheSameFrozenVersion) {
  const FrozenMap frozen = PerHeadExample();
  StatusOr<std::string> text = FrozenMapToJson(frozen);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  // The frozen document's version is the response map's; the embedded map carries its own.
  EXPECT_EQ(j["schema_version"], kFrozenMapSchemaVersion);
  EXPECT_EQ(j["map"]["schema_version"], kBudgetMapPerHeadSchemaVersion);
  EXPECT_EQ(j["map"]["layers"][1]["head_tokens"], nlohmann::json::parse("[150, 213]"));
  StatusOr<FrozenMap> back = FrozenMapFromJson(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->map.head_tokens, frozen.map.head_tokens);
  EXPECT_TRUE(back->map.options.per_head);
  EXPECT_EQ(back->map.objective, Objective::kResponse);
  EXPECT_EQ(*FrozenMapToJson(*back), *text);
  // Nodes get the native version 2 map; kvpress gains the head ratios; trtllm cannot take it.
  StatusOr<std::string> native = RenderFrozenMap(*back, BudgetFormat::kNative);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(nlohmann::json::parse(*native), j["map"]);
  StatusOr<std::string> kvpress = RenderFrozenMap(*back, BudgetFormat::kKvpress);
  ASSERT_TRUE(kvpress.ok()) << kvpress.status();
  EXPECT_TRUE(nlohmann::json::parse(*kvpress).contains("head_compression_ratios"));
  EXPECT_EQ(RenderFrozenMap(*back, BudgetFormat::kTrtllm).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The same layer budgets as a per-layer map are another document, with native version 1.
  FrozenMap per_layer = frozen;
  per_layer.map.head_tokens.clear();
  per_layer.map.options.per_head = false;
  StatusOr<std::string> per_layer_text = FrozenMapToJson(per_layer);
  ASSERT_TRUE(per_layer_text.ok()) << per_layer_text.status();
  EXPECT_EQ(nlohmann::json::parse(*per_layer_text)["map"]["schema_version"], 1);
}

TEST(FrozenMapTest, AnEmbeddedMapOfAnUnknownVersionIsFailedPrecondition) {
  StatusOr<std::string> text = FrozenMapToJson(PerHeadExample());
  ASSERT_TRUE(text.ok()) << text.status();
  nlohmann::json j = nlohmann::json::parse(*text);
  j["map"]["schema_version"] = 3;
  StatusOr<FrozenMap> parsed = FrozenMapFromJson(j.dump());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(parsed.status().message().find("map.budget map: schema_version 3"), std::string::npos)
      << parsed.status();
  // A per-head map's head budgets are checked inside the frozen document too.
  j = nlohmann::json::parse(*text);
  j["map"]["layers"][0]["head_tokens"][0] = 41;
  parsed = FrozenMapFromJson(j.dump());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("map.budget map: layers[0].tokens: 46 is not the mean"),
            std::string::npos)
      << parsed.status();
}

}  // namespace
}  // namespace ripplekv::method
